package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/faults"
	"github.com/fakepds/fakepds/pds/mail"
	"github.com/fakepds/fakepds/pds/stats"
)

// What a real PDS cannot give a test. Each power works on an in-process PDS
// directly and on an attached fakepds through its control plane
// (/_fakepds/, admin auth); against another PDS (the reference) the test
// is skipped with the reason.

// control calls the control plane: method, path under /_fakepds/, a JSON
// body (nil for none), and decodes the answer into out (nil to ignore).
func (p *PDS) control(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.url+"/_fakepds/"+path, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth("admin", p.adminPassword)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return errNoControlPlane
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("harness: %s /_fakepds/%s: %s: %s", method, path, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

var errNoControlPlane = fmt.Errorf("the PDS has no /_fakepds/ control plane: it is not fakepds")

// power runs a control call for t, skipping t when the PDS is not fakepds
// and failing it on any other error.
func (p *PDS) power(t testing.TB, what, method, path string, body, out any) {
	t.Helper()
	err := p.control(t.Context(), method, path, body, out)
	if err == errNoControlPlane {
		t.Skipf("%s needs fakepds: %v", what, err)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Fail makes the next times calls of method (an NSID, or "*" for every
// method) fail with the HTTP status and XRPC error name; times 0 means
// until ClearFaults. Rules apply in the order added.
func (p *PDS) Fail(t testing.TB, method string, times, status int, errName string) {
	t.Helper()
	p.AddFault(t, faults.Rule{Method: method, Times: times, Status: status, Error: errName, Message: "injected by the harness"})
}

// Delay makes the next times calls of method wait d before they are
// handled (0 times: every call until ClearFaults).
func (p *PDS) Delay(t testing.TB, method string, times int, d time.Duration) {
	t.Helper()
	p.AddFault(t, faults.Rule{Method: method, Times: times, Delay: d})
}

// AddFault installs any fault rule. Faults are shared by every test on the
// PDS: use them on a private PDS (New), or on methods only this test calls.
func (p *PDS) AddFault(t testing.TB, r faults.Rule) {
	t.Helper()
	if p.srv != nil {
		p.srv.Faults().Add(r)
		return
	}
	p.power(t, "AddFault", http.MethodPost, "faults", r, nil)
}

// ClearFaults removes every fault rule.
func (p *PDS) ClearFaults(t testing.TB) {
	t.Helper()
	if p.srv != nil {
		p.srv.Faults().Clear()
		return
	}
	p.power(t, "ClearFaults", http.MethodDelete, "faults", nil, nil)
}

// DropFirehose disconnects every firehose subscriber, as a network blip or
// a PDS restart would; returns how many were dropped.
func (p *PDS) DropFirehose(t testing.TB) int {
	t.Helper()
	if p.srv != nil {
		return p.srv.DropFirehose()
	}
	var out struct {
		Dropped int `json:"dropped"`
	}
	p.power(t, "DropFirehose", http.MethodPost, "firehose/drop", nil, &out)
	return out.Dropped
}

// Clock is a PDS's clock, as a test moves it.
type Clock struct {
	p *PDS
	t testing.TB
}

// Clock returns the PDS's clock. It runs with real time; Advance jumps it
// ahead (tokens and email tokens expire, old firehose events fall out of the
// replay window). The clock is shared by every test on the PDS: prefer a
// private PDS (New) for tests that move it.
func (p *PDS) Clock(t testing.TB) *Clock { return &Clock{p: p, t: t} }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.t.Helper()
	if c.p.srv != nil {
		sc, ok := c.p.srv.Clock().(*clock.Shifted)
		if !ok {
			c.t.Fatalf("Clock.Advance: the server's clock is a %T, not a *clock.Shifted", c.p.srv.Clock())
		}
		sc.Advance(d)
		return
	}
	c.p.power(c.t, "Clock.Advance", http.MethodPost, "clock", map[string]any{"advanceNs": d}, nil)
}

// Now is the PDS's current time.
func (c *Clock) Now() time.Time {
	c.t.Helper()
	if c.p.srv != nil {
		return c.p.srv.Clock().Now()
	}
	var out struct {
		Now time.Time `json:"now"`
	}
	c.p.power(c.t, "Clock.Now", http.MethodGet, "clock", nil, &out)
	return out.Now
}

// Emails returns the emails the PDS would have sent to recipient (an
// email address or a DID) for purpose (confirm_email, update_email,
// reset_password, delete_account, plc_operation; "" for all), oldest first.
func (p *PDS) Emails(t testing.TB, recipient, purpose string) []mail.Message {
	t.Helper()
	if p.srv != nil {
		return p.srv.Outbox().Messages(func(m mail.Message) bool {
			return (recipient == "" || m.To == recipient || m.DID == recipient) && (purpose == "" || m.Purpose == purpose)
		})
	}
	var out struct {
		Messages []mail.Message `json:"messages"`
	}
	p.power(t, "Emails", http.MethodGet, "outbox?"+url.Values{"to": {recipient}, "purpose": {purpose}}.Encode(), nil, &out)
	return out.Messages
}

// EmailToken is the token of the newest email to recipient for purpose; it
// fails the test when there is none.
func (p *PDS) EmailToken(t testing.TB, recipient, purpose string) string {
	t.Helper()
	msgs := p.Emails(t, recipient, purpose)
	if len(msgs) == 0 {
		t.Fatalf("no %s email to %s", purpose, recipient)
	}
	return msgs[len(msgs)-1].Token
}

// Stats are the server-side per-method statistics since the PDS started.
func (p *PDS) Stats(t testing.TB) []stats.Method {
	t.Helper()
	if p.srv != nil {
		return p.srv.Stats().Snapshot()
	}
	var out struct {
		Methods []stats.Method `json:"methods"`
	}
	p.power(t, "Stats", http.MethodGet, "stats", nil, &out)
	return out.Methods
}

// Seq is the newest firehose seq: a consumer under test has caught up once
// it has processed this one.
func (p *PDS) Seq(t testing.TB) int64 {
	t.Helper()
	if p.srv != nil {
		seq, err := p.srv.Seq(t.Context())
		if err != nil {
			t.Fatalf("Seq: %v", err)
		}
		return seq
	}
	var out struct {
		Seq int64 `json:"seq"`
	}
	p.power(t, "Seq", http.MethodGet, "seq", nil, &out)
	return out.Seq
}

// statsTable formats stats for Main's HARNESS_PDS_STATS=1 report.
func statsTable(w io.Writer, methods []stats.Method) {
	fmt.Fprintf(w, "\nfakepds server-side stats\n%-50s %8s %6s %10s %10s %10s\n", "method", "count", "errors", "p50", "p95", "mean")
	for _, m := range methods {
		fmt.Fprintf(w, "%-50s %8d %6d %10s %10s %10s\n", m.Name, m.Count, m.Errors,
			m.P50.Round(time.Microsecond), m.P95.Round(time.Microsecond), m.Mean.Round(time.Microsecond))
	}
}
