package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/faults"
	"github.com/fakepds/fakepds/pds/mail"
	"github.com/fakepds/fakepds/pds/stats"
)

// What a real PDS cannot give a test. Every power is one route of the
// fakepds control plane (/_fakepds/, admin auth, pds/control.go) and one
// method here: an in-process PDS is called through its handler, without a
// socket; an attached fakepds over HTTP. Against another PDS (the
// reference) the test is skipped with the reason.

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
	var resp *http.Response
	if srv := p.Server(); srv != nil {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		resp = rec.Result()
	} else if resp, err = http.DefaultClient.Do(req); err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return errNoControlPlane
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s /_fakepds/%s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

var errNoControlPlane = errors.New("the PDS has no /_fakepds/ control plane: it is not fakepds")

// power runs a control call for t, skipping t when the PDS is not fakepds
// and failing it on any other error.
func (p *PDS) power(t testing.TB, what, method, path string, body, out any) {
	t.Helper()
	p.alive(t, what)
	err := p.control(t.Context(), method, path, body, out)
	if errors.Is(err, errNoControlPlane) {
		t.Skipf("harness: %s needs fakepds: %v", what, err)
	}
	if err != nil {
		t.Fatalf("harness: %s: %v", what, err)
	}
}

// Fail makes the next times calls of method (an NSID, or "*" for every
// method) fail with the HTTP status (400 to 599) and XRPC error name;
// times 0 means until ClearFaults. Rules apply in the order added.
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
// A rule that could not do what it says fails the test: a method that is
// not an NSID (or "*"), a status outside 400-599, an error status without
// a name, negative times or delay, a rule that does nothing.
func (p *PDS) AddFault(t testing.TB, r faults.Rule) {
	t.Helper()
	if err := checkRule(r); err != nil {
		t.Fatalf("harness: fault %+v: %v", r, err)
	}
	p.power(t, "AddFault", http.MethodPost, "faults", r, nil)
}

func checkRule(r faults.Rule) error {
	if _, err := syntax.ParseNSID(r.Method); err != nil && r.Method != "*" {
		return fmt.Errorf("method %q is not an NSID (com.atproto.repo.createRecord) or \"*\"", r.Method)
	}
	switch {
	case r.Times < 0:
		return errors.New("negative times (0 means until ClearFaults)")
	case r.Delay < 0:
		return errors.New("negative delay")
	case r.Status != 0 && (r.Status < 400 || r.Status > 599):
		return fmt.Errorf("status %d is not an error status (400-599)", r.Status)
	case r.Status != 0 && r.Error == "":
		return errors.New("an error status needs an XRPC error name (InternalServerError, RateLimitExceeded, ...)")
	case r.Status == 0 && r.Error != "":
		return fmt.Errorf("error %q without a status", r.Error)
	case r.Status == 0 && r.Delay == 0:
		return errors.New("neither a status nor a delay: the rule would do nothing")
	}
	return nil
}

// ClearFaults removes every fault rule.
func (p *PDS) ClearFaults(t testing.TB) {
	t.Helper()
	p.power(t, "ClearFaults", http.MethodDelete, "faults", nil, nil)
}

// DropFirehose disconnects every firehose subscriber, as a network blip or
// a PDS restart would; returns how many were dropped.
func (p *PDS) DropFirehose(t testing.TB) int {
	t.Helper()
	var out struct {
		Dropped int `json:"dropped"`
	}
	p.power(t, "DropFirehose", http.MethodPost, "firehose/drop", nil, &out)
	return out.Dropped
}

// FirehoseSubscribers is how many firehose subscriptions the PDS serves
// now: every consumer's, this process's Firehose ones included.
func (p *PDS) FirehoseSubscribers(t testing.TB) int {
	t.Helper()
	var out struct {
		Subscribers int `json:"subscribers"`
	}
	p.power(t, "FirehoseSubscribers", http.MethodGet, "firehose/subscribers", nil, &out)
	return out.Subscribers
}

// WaitSubscribers waits until the PDS serves at least n firehose
// subscriptions: start the consumer under test, wait for it to connect,
// then write, and it cannot miss the first write. On the shared PDS other
// tests' subscriptions count too: use a private PDS (New), or start the
// consumer from a cursor (p.Seq before it starts) instead.
func (p *PDS) WaitSubscribers(t testing.TB, n int) {
	t.Helper()
	got := 0
	poll(t, DefaultWait, func() bool { got = p.FirehoseSubscribers(t); return got >= n },
		func() string {
			return fmt.Sprintf("harness: WaitSubscribers: %d firehose subscribers after %s, want %d", got, DefaultWait, n)
		})
}

// WaitCaughtUp waits until a consumer under test has processed every
// firehose event the PDS had when it was called: until seen (the seq of
// the newest event the consumer has processed) reaches p.Seq. It fails
// the test after DefaultWait, saying where the consumer stopped.
func (p *PDS) WaitCaughtUp(t testing.TB, seen func() int64) {
	t.Helper()
	head := p.Seq(t)
	var last int64
	poll(t, DefaultWait, func() bool { last = seen(); return last >= head },
		func() string {
			return fmt.Sprintf("harness: WaitCaughtUp: the consumer is at seq %d after %s, the PDS's head was %d when the wait began", last, DefaultWait, head)
		})
}

// poll checks done with a short, growing interval until it holds or
// within runs out (or the test's deadline comes first).
func poll(t testing.TB, within time.Duration, done func() bool, failure func() string) {
	t.Helper()
	ctx, cancel := bounded(t.Context(), within)
	defer cancel()
	for wait := time.Millisecond; !done(); wait = min(2*wait, 50*time.Millisecond) {
		select {
		case <-ctx.Done():
			if done() {
				return
			}
			t.Fatal(failure())
		case <-time.After(wait):
		}
	}
}

// Clock is a PDS's clock, as a test moves it.
type Clock struct {
	p *PDS
	t testing.TB
}

// Clock returns the PDS's clock. It runs with real time (a seeded PDS's,
// WithSeed, stands at SeedEpoch); Advance jumps it ahead (tokens and email tokens expire, old firehose events fall out of the
// replay window). The clock is shared by every test on the PDS: prefer a
// private PDS (New) for tests that move it.
func (p *PDS) Clock(t testing.TB) *Clock { return &Clock{p: p, t: t} }

// Advance moves the clock forward by d. The clock never goes back: a
// negative d fails the test.
func (c *Clock) Advance(d time.Duration) {
	c.t.Helper()
	if d < 0 {
		c.t.Fatalf("harness: Clock.Advance(%s): the clock only moves forward", d)
	}
	c.p.power(c.t, "Clock.Advance", http.MethodPost, "clock", map[string]any{"advanceNs": d}, nil)
}

// Now is the PDS's current time.
func (c *Clock) Now() time.Time {
	c.t.Helper()
	var out struct {
		Now time.Time `json:"now"`
	}
	c.p.power(c.t, "Clock.Now", http.MethodGet, "clock", nil, &out)
	return out.Now
}

// Purpose is why the PDS sent an email.
type Purpose string

// The purposes of the emails a PDS sends, as Emails and EmailToken take
// them.
const (
	PurposeConfirmEmail  = Purpose(account.PurposeConfirmEmail)
	PurposeUpdateEmail   = Purpose(account.PurposeUpdateEmail)
	PurposeResetPassword = Purpose(account.PurposeResetPassword)
	PurposeDeleteAccount = Purpose(account.PurposeDeleteAccount)
	PurposePLCOperation  = Purpose(account.PurposePLCOperation)
	PurposeAdmin         = Purpose("admin") // com.atproto.admin.sendEmail
)

var purposes = []Purpose{PurposeConfirmEmail, PurposeUpdateEmail, PurposeResetPassword, PurposeDeleteAccount, PurposePLCOperation, PurposeAdmin}

// Emails returns the emails the PDS would have sent to recipient (an
// email address or a DID; "" for everyone) for purpose ("" for all),
// oldest first. A purpose that is none of the Purpose constants fails the
// test: a typo would otherwise match nothing, silently.
func (p *PDS) Emails(t testing.TB, recipient string, purpose Purpose) []mail.Message {
	t.Helper()
	if purpose != "" && !slices.Contains(purposes, purpose) {
		t.Fatalf("harness: Emails: purpose %q is not one of %q", purpose, purposes)
	}
	var out struct {
		Messages []mail.Message `json:"messages"`
	}
	p.power(t, "Emails", http.MethodGet, "outbox?"+url.Values{"to": {recipient}, "purpose": {string(purpose)}}.Encode(), nil, &out)
	return out.Messages
}

// EmailToken is the token of the newest email to recipient for purpose; it
// fails the test when there is none.
func (p *PDS) EmailToken(t testing.TB, recipient string, purpose Purpose) string {
	t.Helper()
	msgs := p.Emails(t, recipient, purpose)
	if len(msgs) == 0 {
		t.Fatalf("harness: no %s email to %s", purpose, recipient)
	}
	return msgs[len(msgs)-1].Token
}

// Stats are the server-side per-method statistics since the PDS started.
func (p *PDS) Stats(t testing.TB) []stats.Method {
	t.Helper()
	var out struct {
		Methods []stats.Method `json:"methods"`
	}
	p.power(t, "Stats", http.MethodGet, "stats", nil, &out)
	return out.Methods
}

func (p *PDS) stats(ctx context.Context) ([]stats.Method, error) {
	var out struct {
		Methods []stats.Method `json:"methods"`
	}
	err := p.control(ctx, http.MethodGet, "stats", nil, &out)
	return out.Methods, err
}

// Seq is the newest firehose seq: a consumer under test has caught up once
// it has processed this one (WaitCaughtUp).
func (p *PDS) Seq(t testing.TB) int64 {
	t.Helper()
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
