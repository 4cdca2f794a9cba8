// Package mail captures the emails the PDS would send. fakepds sends no
// mail: every message lands in an Outbox that tests read (for the tokens of
// confirmation, reset and deletion flows) through the harness or the
// control plane.
package mail

import (
	"sync"
	"time"
)

// Message is one email the PDS would have sent.
type Message struct {
	To      string    `json:"to"`
	DID     string    `json:"did"`
	Purpose string    `json:"purpose"` // confirm_email, update_email, reset_password, delete_account, plc_operation, admin
	Token   string    `json:"token,omitempty"`
	Subject string    `json:"subject"`
	Body    string    `json:"body"`
	Time    time.Time `json:"time"`
}

// Outbox keeps the last Cap messages, oldest first. Safe for concurrent use.
type Outbox struct {
	mu   sync.Mutex
	msgs []Message
}

// Cap bounds the outbox so a long-running shared server's memory stays
// bounded; older messages are dropped first.
const Cap = 10_000

// Send records m.
func (o *Outbox) Send(m Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.msgs) >= Cap {
		o.msgs = append(o.msgs[:0], o.msgs[len(o.msgs)-Cap+1:]...)
	}
	o.msgs = append(o.msgs, m)
}

// Messages returns the messages that match keep (all when nil), oldest
// first.
func (o *Outbox) Messages(keep func(Message) bool) []Message {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Message
	for _, m := range o.msgs {
		if keep == nil || keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// Last returns the newest message to recipient to (an email address or a
// DID) for purpose, and whether there is one.
func (o *Outbox) Last(to, purpose string) (Message, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := len(o.msgs) - 1; i >= 0; i-- {
		m := o.msgs[i]
		if (m.To == to || m.DID == to) && (purpose == "" || m.Purpose == purpose) {
			return m, true
		}
	}
	return Message{}, false
}
