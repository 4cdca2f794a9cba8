package mail_test

import (
	"fmt"
	"testing"

	"github.com/fakepds/fakepds/pds/mail"
)

func TestOutbox(t *testing.T) {
	var o mail.Outbox
	o.Send(mail.Message{To: "a@example.com", DID: "did:plc:a", Purpose: "confirm_email", Token: "T1"})
	o.Send(mail.Message{To: "b@example.com", DID: "did:plc:b", Purpose: "confirm_email", Token: "T2"})
	o.Send(mail.Message{To: "a@example.com", DID: "did:plc:a", Purpose: "confirm_email", Token: "T3"})
	if m, ok := o.Last("a@example.com", "confirm_email"); !ok || m.Token != "T3" {
		t.Fatalf("Last by email = %+v %v", m, ok)
	}
	if m, ok := o.Last("did:plc:b", ""); !ok || m.Token != "T2" {
		t.Fatalf("Last by DID = %+v %v", m, ok)
	}
	if _, ok := o.Last("a@example.com", "reset_password"); ok {
		t.Fatal("found a message never sent")
	}
	if n := len(o.Messages(func(m mail.Message) bool { return m.DID == "did:plc:a" })); n != 2 {
		t.Fatalf("%d messages for a", n)
	}
}

func TestOutboxIsBounded(t *testing.T) {
	var o mail.Outbox
	for i := range mail.Cap + 5 {
		o.Send(mail.Message{To: fmt.Sprint(i)})
	}
	all := o.Messages(nil)
	if len(all) != mail.Cap || all[0].To != "5" || all[len(all)-1].To != fmt.Sprint(mail.Cap+4) {
		t.Fatalf("len %d, first %s, last %s", len(all), all[0].To, all[len(all)-1].To)
	}
}
