package pds

import (
	"context"
	"net/http"
	"time"

	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/faults"
	"github.com/fakepds/fakepds/pds/mail"
	"github.com/fakepds/fakepds/pds/stats"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// The control plane: what a real PDS cannot do, for tests in other
// languages and for a PDS shared over HTTP. Every route needs the admin's
// HTTP Basic credentials. See docs/harness.md.
//
//	GET    /_fakepds/stats            per-method stats; DELETE resets them
//	GET    /_fakepds/faults           the active fault rules
//	POST   /_fakepds/faults           add a rule (faults.Rule as JSON)
//	DELETE /_fakepds/faults           clear the rules
//	POST   /_fakepds/firehose/drop    disconnect every firehose subscriber
//	GET    /_fakepds/firehose/subscribers  {"subscribers": live subscriptions}
//	GET    /_fakepds/clock            {"now", "offsetNs"}
//	POST   /_fakepds/clock            {"advanceNs": n} moves the clock forward
//	GET    /_fakepds/outbox           captured emails (?to=<email or DID>&purpose=...)
//	GET    /_fakepds/seq              {"seq": newest firehose seq}
//	POST   /_fakepds/oauth/authorize  {"url", "account", "deny"} signs in and consents (or denies) without a browser: {"redirect"}
//	GET    /_fakepds/oauth/sessions   ?account=<handle or DID>: the account's OAuth sessions; DELETE (&client_id=, or all) revokes them
func (s *Server) controlRoutes(mux *http.ServeMux) {
	h := func(pattern string, fn func(w http.ResponseWriter, r *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := s.admin(r); err != nil {
				xrpc.WriteError(w, err)
				return
			}
			if err := fn(w, r); err != nil {
				xrpc.WriteError(w, err)
			}
		})
	}
	h("GET /_fakepds/stats", func(w http.ResponseWriter, r *http.Request) error {
		xrpc.WriteJSON(w, http.StatusOK, map[string]any{"methods": s.stats.Snapshot()})
		return nil
	})
	h("DELETE /_fakepds/stats", func(w http.ResponseWriter, r *http.Request) error {
		s.stats.Reset()
		return noOutput(w)
	})
	h("GET /_fakepds/faults", func(w http.ResponseWriter, r *http.Request) error {
		xrpc.WriteJSON(w, http.StatusOK, map[string]any{"rules": s.faults.Rules()})
		return nil
	})
	h("POST /_fakepds/faults", func(w http.ResponseWriter, r *http.Request) error {
		var rule faults.Rule
		if err := xrpc.DecodeJSON(r, xrpc.JSONLimit, &rule); err != nil {
			return err
		}
		if rule.Method == "" {
			return xrpc.MissingInput("method")
		}
		s.faults.Add(rule)
		return noOutput(w)
	})
	h("DELETE /_fakepds/faults", func(w http.ResponseWriter, r *http.Request) error {
		s.faults.Clear()
		return noOutput(w)
	})
	h("POST /_fakepds/firehose/drop", func(w http.ResponseWriter, r *http.Request) error {
		xrpc.WriteJSON(w, http.StatusOK, map[string]int{"dropped": s.firehose.Drop()})
		return nil
	})
	h("GET /_fakepds/firehose/subscribers", func(w http.ResponseWriter, r *http.Request) error {
		xrpc.WriteJSON(w, http.StatusOK, map[string]int{"subscribers": s.firehose.Subscribers()})
		return nil
	})
	h("GET /_fakepds/clock", func(w http.ResponseWriter, r *http.Request) error {
		var offset time.Duration
		if c, ok := s.clock.(clock.Movable); ok {
			offset = c.Offset()
		}
		xrpc.WriteJSON(w, http.StatusOK, map[string]any{"now": s.clock.Now().UTC().Format(time.RFC3339Nano), "offsetNs": offset})
		return nil
	})
	h("POST /_fakepds/clock", func(w http.ResponseWriter, r *http.Request) error {
		var in struct {
			AdvanceNs time.Duration `json:"advanceNs"`
		}
		if err := xrpc.DecodeJSON(r, xrpc.JSONLimit, &in); err != nil {
			return err
		}
		c, ok := s.clock.(clock.Movable)
		if !ok {
			return xrpc.InvalidRequest("", "this server's clock cannot be moved (Config.Clock is no clock.Movable: a *clock.Shifted or *clock.Frozen)")
		}
		c.Advance(in.AdvanceNs)
		xrpc.WriteJSON(w, http.StatusOK, map[string]any{"now": s.clock.Now().UTC().Format(time.RFC3339Nano), "offsetNs": c.Offset()})
		return nil
	})
	h("GET /_fakepds/outbox", func(w http.ResponseWriter, r *http.Request) error {
		to, purpose := r.URL.Query().Get("to"), r.URL.Query().Get("purpose")
		msgs := s.outbox.Messages(func(m mail.Message) bool {
			return (to == "" || m.To == to || m.DID == to) && (purpose == "" || m.Purpose == purpose)
		})
		if msgs == nil {
			msgs = []mail.Message{}
		}
		xrpc.WriteJSON(w, http.StatusOK, map[string]any{"messages": msgs})
		return nil
	})
	h("POST /_fakepds/oauth/authorize", s.approveOAuth)
	h("GET /_fakepds/oauth/sessions", s.oauthSessions)
	h("DELETE /_fakepds/oauth/sessions", s.oauthSessions)
	h("GET /_fakepds/seq", func(w http.ResponseWriter, r *http.Request) error {
		seq, err := s.seq.Head(r.Context())
		if err != nil {
			return err
		}
		xrpc.WriteJSON(w, http.StatusOK, map[string]int64{"seq": seq})
		return nil
	})
}

// Faults are the server's fault injection rules.
func (s *Server) Faults() *faults.Faults { return &s.faults }

// Stats are the server's per-method statistics.
func (s *Server) Stats() *stats.Stats { return &s.stats }

// Clock is the server's clock.
func (s *Server) Clock() clock.Clock { return s.clock }

// DropFirehose disconnects every firehose subscriber and says how many.
func (s *Server) DropFirehose() int { return s.firehose.Drop() }

// Seq is the newest firehose seq.
func (s *Server) Seq(ctx context.Context) (int64, error) { return s.seq.Head(ctx) }
