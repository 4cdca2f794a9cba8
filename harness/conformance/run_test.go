package conformance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/bluesky-social/indigo/events"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/ipfs/go-cid"
	cbor "github.com/ipfs/go-ipld-cbor"
	car "github.com/ipld/go-car"

	"github.com/fakepds/fakepds/harness"
)

// run is one scenario running on one backend: it makes the calls, keeps
// what they answered, and turns it into a Transcript at the end (so that
// a DID learnt from a later answer is still named in an earlier one).
type run struct {
	t       *testing.T
	backend string
	p       *harness.PDS
	anon    *atclient.APIClient
	n       *Normalizer

	steps    []rawStep
	names    map[string]bool
	dids     map[string]bool // accounts whose firehose events are captured
	sentinel *harness.Account
}

type rawStep struct {
	name, call  string
	status      int
	ctype, xerr string
	body        any
	events      []any
	checks      map[string]any
}

func newRun(t *testing.T, backend string, p *harness.PDS) *run {
	r := &run{t: t, backend: backend, p: p, anon: atclient.NewAPIClient(p.URL()), n: NewNormalizer(),
		names: map[string]bool{}, dids: map[string]bool{}}
	r.n.Name(p.URL(), "<pds-url>")
	// In dev mode the PDS's public URL (in DID documents) is
	// http://localhost:PORT, whatever address the harness dials.
	if u, err := url.Parse(p.URL()); err == nil {
		r.n.Name("http://localhost:"+u.Port(), "<pds-url>")
	}
	if p.PLCURL() != "" {
		r.n.Name(p.PLCURL(), "<plc-url>")
	}
	return r
}

func (r *run) addStep(s rawStep) {
	r.t.Helper()
	if r.names[s.name] {
		r.t.Fatalf("scenario bug: two steps named %q", s.name)
	}
	r.names[s.name] = true
	r.steps = append(r.steps, s)
}

// transcript normalizes every step, in order.
func (r *run) transcript(scenario string) *Transcript {
	tr := &Transcript{Scenario: scenario, Steps: []Step{}}
	for _, s := range r.steps {
		st := Step{Name: s.name, Call: s.call, Status: s.status, Type: s.ctype, Error: s.xerr}
		if s.body != nil {
			st.Body = r.n.Value("", s.body)
		}
		for _, e := range s.events {
			st.Events = append(st.Events, r.n.Value("", e))
		}
		if s.checks != nil {
			st.Checks = r.n.Value("", s.checks).(map[string]any)
		}
		tr.Steps = append(tr.Steps, st)
	}
	return tr
}

// ---------------------------------------------------------------- accounts

// account makes an account through the harness (not a step) and names
// its DID, handle and email "<did:NAME>", "<handle:NAME>", "<email:NAME>".
func (r *run) account(name string) *harness.Account {
	r.t.Helper()
	a := r.p.NewAccount(r.t, harness.WithHandlePrefix(name))
	r.nameAccount(name, a.DID.String(), a.Handle.String(), a.Email)
	return a
}

func (r *run) nameAccount(name, did, handle, email string) {
	r.n.Name(did, "<did:"+name+">")
	r.n.Name(handle, "<handle:"+name+">")
	r.n.Name(email, "<email:"+name+">")
	if did != "" {
		r.dids[did] = true
	}
}

// newHandle is a handle and email no other run will use, named for
// name: for scenarios that call createAccount themselves.
func (r *run) newHandle(name string) (handle, email string) {
	id := strings.ReplaceAll(uuid.NewString(), "-", "")
	handle = name + "-" + id[:10] + ".test"
	email = id[10:22] + "@example.com"
	r.n.Name(handle, "<handle:"+name+">")
	r.n.Name(email, "<email:"+name+">")
	return handle, email
}

// ------------------------------------------------------------------ calls

// as says how a call authenticates: nil (no auth), an *harness.Account
// (its access token), admin (HTTP Basic admin), bearer (a raw token) or basic.
type (
	adminAuth struct{}
	bearer    string
	basic     struct{ user, password string }
)

var admin = adminAuth{}

// raw is a request body that is not JSON.
type raw struct {
	data  []byte
	ctype string
}

// resp is what a call answered.
type resp struct {
	Status int
	Type   string
	Error  string
	JSON   map[string]any // nil when the body is not a JSON object
	Raw    []byte
}

// S is the string at a dotted path in the JSON body ("" when absent).
func (re *resp) S(path string) string {
	s, _ := re.At(path).(string)
	return s
}

// At is the value at a dotted path in the JSON body.
func (re *resp) At(path string) any {
	var v any = re.JSON
	for _, k := range strings.Split(path, ".") {
		switch m := v.(type) {
		case map[string]any:
			v = m[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(m) {
				return nil
			}
			v = m[i]
		default:
			return nil
		}
	}
	return v
}

// get calls a query; params are name, value pairs.
func (r *run) get(step string, as any, nsid string, params ...string) *resp {
	r.t.Helper()
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Add(params[i], params[i+1])
	}
	req := atclient.NewAPIRequest(http.MethodGet, syntax.NSID(nsid), nil)
	req.QueryParams = q
	return r.do(step, "GET "+nsid, as, req)
}

// post calls a procedure with a JSON body (nil: none) or a raw one.
func (r *run) post(step string, as any, nsid string, body any) *resp {
	r.t.Helper()
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case raw:
		rd, ctype = bytes.NewReader(b.data), b.ctype
	case string: // a body sent as is, as JSON (malformed on purpose)
		rd, ctype = strings.NewReader(b), "application/json"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			r.t.Fatalf("%s: %v", step, err)
		}
		rd, ctype = bytes.NewReader(j), "application/json"
	}
	req := atclient.NewAPIRequest(http.MethodPost, syntax.NSID(nsid), rd)
	if ctype != "" {
		req.Headers.Set("Content-Type", ctype)
	}
	return r.do(step, "POST "+nsid, as, req)
}

func (r *run) do(step, call string, as any, req *atclient.APIRequest) *resp {
	r.t.Helper()
	c := r.anon
	switch a := as.(type) {
	case nil:
	case *harness.Account:
		// The account's own token, sent as is: its client would turn
		// answers other than 2xx into errors and refresh on ExpiredToken.
		pa, ok := a.Client.Auth.(*atclient.PasswordAuth)
		if !ok {
			r.t.Fatalf("scenario bug: account %s has no password session", a.Handle)
		}
		access, _ := pa.GetTokens()
		req.Headers.Set("Authorization", "Bearer "+access)
	case adminAuth:
		req.Headers.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("admin:"+r.p.AdminPassword())))
	case bearer:
		req.Headers.Set("Authorization", "Bearer "+string(a))
	case basic:
		req.Headers.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(a.user+":"+a.password)))
	default:
		r.t.Fatalf("scenario bug: auth %T", as)
	}
	ctx, cancel := context.WithTimeout(r.t.Context(), 30*time.Second)
	defer cancel()
	hr, err := c.Do(ctx, req)
	if err != nil {
		r.t.Fatalf("%s (%s): %v", step, call, err)
	}
	return r.record(step, call, hr)
}

// plain is a GET of a path that is not XRPC (/.well-known/...), with
// optional headers (name, value pairs).
func (r *run) plain(step, base, path string, headers ...string) *resp {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.t.Context(), http.MethodGet, base+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "host") {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatalf("%s (GET %s): %v", step, path, err)
	}
	return r.record(step, "GET "+path, hr)
}

func (r *run) record(step, call string, hr *http.Response) *resp {
	r.t.Helper()
	defer hr.Body.Close()
	b, err := io.ReadAll(hr.Body)
	if err != nil {
		r.t.Fatalf("%s: reading the body: %v", step, err)
	}
	re := &resp{Status: hr.StatusCode, Type: hr.Header.Get("Content-Type"), Raw: b}
	s := rawStep{name: step, call: call, status: re.Status, ctype: re.Type}
	mt := strings.TrimSpace(strings.Split(re.Type, ";")[0])
	switch {
	case mt == "application/json":
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			s.body = map[string]any{"$invalidJSON": len(b)}
			break
		}
		s.body = v
		re.JSON, _ = v.(map[string]any)
		if re.Status >= 400 && re.JSON != nil {
			re.Error, _ = re.JSON["error"].(string)
			s.xerr = re.Error
		}
	case mt == "application/vnd.ipld.car":
		s.body = map[string]any{"$car": carSummary(b)}
	case len(b) == 0:
	case strings.HasPrefix(mt, "text/") && len(b) <= 1024:
		s.body = map[string]any{"$text": string(b)}
	default:
		s.body = map[string]any{"$bytes": len(b)}
	}
	r.addStep(s)
	return re
}

// check records facts the scenario computed, as a step of their own.
func (r *run) check(step string, checks map[string]any) {
	r.t.Helper()
	r.addStep(rawStep{name: step, call: "check", checks: checks})
}

// carSummary is a CAR file's roots and block count, or why it does not
// parse.
func carSummary(b []byte) map[string]any {
	cr, err := car.NewCarReader(bytes.NewReader(b))
	if err != nil {
		return map[string]any{"error": "unreadable CAR"}
	}
	roots := []any{}
	for _, c := range cr.Header.Roots {
		roots = append(roots, c.String())
	}
	n := 0
	for {
		_, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return map[string]any{"roots": roots, "error": "truncated CAR"}
		}
		n++
	}
	return map[string]any{"roots": roots, "blocks": n}
}

// --------------------------------------------------------------- firehose

// capture is a firehose subscription whose frames are kept as sent: CBOR
// decoded generically, so that a field absent, null or empty shows.
type capture struct {
	conn   *websocket.Conn
	mu     sync.Mutex
	frames []frame
	closed bool
	more   chan struct{} // a frame arrived or the stream closed
	start  func(frame) bool
}

type frame struct {
	op   int64
	typ  string
	body map[string]any
}

// subscribe opens the firehose, from a cursor when cursor is not nil. A
// live subscription (no cursor) may still be sent events sequenced just
// before it (the reference's outbox starts from where its sequencer last
// polled), so it starts with a marker: the run's sentinel account writes
// a record, and the capture keeps only what follows that write's commit.
func (r *run) subscribe(cursor *int64) *capture {
	r.t.Helper()
	u := "ws" + strings.TrimPrefix(r.p.URL(), "http") + "/xrpc/com.atproto.sync.subscribeRepos"
	if cursor != nil {
		u += "?cursor=" + strconv.FormatInt(*cursor, 10)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(r.t.Context(), u, nil)
	if err != nil {
		r.t.Fatalf("subscribeRepos: %v", err)
	}
	c := &capture{conn: conn, more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, msg, err := conn.ReadMessage()
			c.mu.Lock()
			if err != nil {
				c.closed = true
			} else {
				c.frames = append(c.frames, decodeFrame(msg))
			}
			c.mu.Unlock()
			select {
			case c.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	r.t.Cleanup(func() { conn.Close(); <-done })
	if cursor == nil {
		c.start = r.mark(c)
	}
	return c
}

// mark has the sentinel account write a record and waits for its commit
// on c; it returns a matcher for that commit.
func (r *run) mark(c *capture) func(frame) bool {
	r.t.Helper()
	if r.sentinel == nil {
		r.sentinel = r.p.NewAccount(r.t, harness.WithHandlePrefix("sentinel"))
	}
	ref := r.sentinel.Post(r.t, "sentinel")
	path := ref.URI.Collection().String() + "/" + ref.URI.RecordKey().String()
	sentinel := r.sentinel.DID.String()
	is := func(f frame) bool {
		if f.typ != "#commit" || f.did() != sentinel {
			return false
		}
		ops, _ := f.body["ops"].([]any)
		for _, op := range ops {
			if m, ok := op.(map[string]any); ok && m["path"] == path {
				return true
			}
		}
		return false
	}
	c.wait(r.t, "the sentinel's commit", func(frames []frame, _ bool) bool {
		for _, f := range frames {
			if is(f) {
				return true
			}
		}
		return false
	})
	return is
}

func decodeFrame(msg []byte) frame {
	rd := bytes.NewReader(msg)
	var h events.EventHeader
	if err := h.UnmarshalCBOR(rd); err != nil {
		return frame{op: 0, typ: "(undecodable header)"}
	}
	var body map[string]any
	if err := cbor.DecodeInto(msg[len(msg)-rd.Len():], &body); err != nil {
		return frame{op: h.Op, typ: h.MsgType, body: map[string]any{"$undecodable": err.Error()}}
	}
	return frame{op: h.Op, typ: h.MsgType, body: body}
}

// firehoseWait bounds a wait for frames: the reference's sequencer polls,
// with backoff up to a second after idle.
const firehoseWait = 20 * time.Second

// wait returns the frames once until says so, or fails the test after
// firehoseWait.
func (c *capture) wait(t *testing.T, what string, until func(frames []frame, closed bool) bool) []frame {
	t.Helper()
	frames, closed, ok := c.waitFor(firehoseWait, until)
	if !ok && closed {
		t.Fatalf("firehose closed while waiting for %s (%d frames)", what, len(frames))
	}
	if !ok {
		t.Fatalf("firehose: no %s within %s (%d frames)", what, firehoseWait, len(frames))
	}
	return frames
}

// waitFor waits at most d for until to hold.
func (c *capture) waitFor(d time.Duration, until func(frames []frame, closed bool) bool) (frames []frame, closed, ok bool) {
	deadline := time.After(d)
	for {
		c.mu.Lock()
		frames, closed = append([]frame(nil), c.frames...), c.closed
		c.mu.Unlock()
		if until(frames, closed) {
			return frames, closed, true
		}
		if closed {
			return frames, closed, false
		}
		select {
		case <-c.more:
		case <-deadline:
			return frames, closed, false
		}
	}
}

func (f frame) did() string {
	for _, k := range []string{"repo", "did"} {
		if s, ok := f.body[k].(string); ok {
			return s
		}
	}
	return ""
}

func (f frame) seq() int64 {
	switch v := f.body["seq"].(type) {
	case int64:
		return v
	case uint64:
		return int64(v)
	case int:
		return int64(v)
	}
	return -1
}

// events ends a capture: the sentinel writes a record (mark), and every
// frame between the capture's start (its own marker, or the cursor) and
// that write's commit that concerns this run's accounts (or no account:
// #info) becomes the step. Frames are in seq order on every PDS, so the
// marker's commit comes after every event of the calls made before it.
func (r *run) events(step string, c *capture) []frame {
	r.t.Helper()
	end := r.mark(c)
	c.mu.Lock()
	frames := append([]frame(nil), c.frames...)
	c.mu.Unlock()
	started := c.start == nil
	var kept []frame
	for _, f := range frames {
		if !started {
			started = c.start(f)
			continue
		}
		if end(f) {
			break
		}
		if d := f.did(); d == "" || r.dids[d] {
			kept = append(kept, f)
		}
	}
	r.recordFrames(step, kept)
	return kept
}

// firstFrames records the first n frames, or those sent before the
// server closed the stream.
func (r *run) firstFrames(step string, c *capture, n int) {
	r.t.Helper()
	var closed bool
	frames := c.wait(r.t, fmt.Sprintf("%d frames", n), func(frames []frame, cl bool) bool {
		closed = cl
		return len(frames) >= n || cl
	})
	if len(frames) > n {
		frames = frames[:n]
	}
	if !closed {
		// Give a server that closes after its error frame the chance to.
		_, closed, _ = c.waitFor(5*time.Second, func(_ []frame, cl bool) bool { return cl })
	}
	r.recordFrames(step, frames)
	r.steps[len(r.steps)-1].checks["closed"] = closed
}

func (r *run) recordFrames(step string, frames []frame) {
	var evs []any
	increasing := true
	last := int64(-1)
	for _, f := range frames {
		e := map[string]any{}
		for k, v := range f.body {
			e[k] = cborToJSON(k, v)
		}
		if f.op == -1 {
			e["$op"] = int64(-1)
		} else {
			e["$type"] = f.typ
		}
		if s := f.seq(); s >= 0 {
			if s <= last {
				increasing = false
			}
			last = s
		}
		evs = append(evs, e)
	}
	if evs == nil {
		evs = []any{}
	}
	r.addStep(rawStep{name: step, call: "firehose", events: evs, checks: map[string]any{"seqIncreasing": increasing, "count": len(evs)}})
}

// cborToJSON turns decoded CBOR into the JSON data model's shapes: links
// as {"$link": cid}, bytes as {"$bytes": length}, and a commit's blocks as
// the CAR's summary.
func cborToJSON(key string, v any) any {
	switch v := v.(type) {
	case cid.Cid:
		return map[string]any{"$link": v.String()}
	case *cid.Cid:
		if v == nil {
			return nil
		}
		return map[string]any{"$link": v.String()}
	case []byte:
		if key == "blocks" {
			return map[string]any{"$car": carSummary(v)}
		}
		return map[string]any{"$bytes": len(v)}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = cborToJSON(k, e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			ks := fmt.Sprint(k)
			out[ks] = cborToJSON(ks, e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cborToJSON(key, e)
		}
		return out
	default:
		return v
	}
}
