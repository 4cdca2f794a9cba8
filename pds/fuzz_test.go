package pds_test

// The fuzz targets' shared harness: one in-process server per fuzz process
// (driven through Handler, no socket), its seeded accounts, one bounded
// call, and the invariant every target checks. The targets are in the
// *_fuzz_test.go files beside this one; `make fuzz` runs them (scripts/fuzz.sh).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/lexval"
	"github.com/fakepds/fakepds/pds/repo"
)

// callTimeout bounds one call: a call that has not answered by then is a
// hang, whatever the input.
const callTimeout = 10 * time.Second

// fuzzAccount is one of the accounts every fuzz server starts with.
type fuzzAccount struct {
	DID, Handle, Email, Password string
	Access, Refresh              string
}

// fuzzPDS is the server a fuzz target drives, with two accounts holding a
// few records each.
type fuzzPDS struct {
	s *pds.Server
	// remote, when set, is the URL of another PDS (the reference) the
	// calls go to instead of s; TestOddCases uses it.
	remote     *refPDS
	alice, bob fuzzAccount
	admin      string // the Authorization header of the admin
	logs       *errorLog
	// known is state as of the last call, "" when a call succeeded since
	// (only a success may change it).
	known string
}

// newFuzzPDS starts the server a fuzz target drives. Each fuzz process
// (the coordinator and every worker) makes its own; inputs name its
// accounts through placeholders (see expand), never by DID.
func newFuzzPDS(tb testing.TB) *fuzzPDS {
	tb.Helper()
	p := &fuzzPDS{logs: &errorLog{}}
	p.open(tb)
	tb.Cleanup(func() { p.s.Close() })
	return p
}

func (p *fuzzPDS) open(tb testing.TB) {
	tb.Helper()
	if p.remote != nil {
		p.admin = basicAuth(p.remote.AdminPassword)
	} else {
		s, err := pds.New(pds.Config{Logger: slog.New(p.logs)})
		if err != nil {
			tb.Fatal(err)
		}
		p.s = s
		p.admin = basicAuth(s.AdminPassword())
	}
	p.alice = p.seedAccount(tb, "alice")
	p.bob = p.seedAccount(tb, "bob")
	for _, a := range []fuzzAccount{p.alice, p.bob} {
		for i, rkey := range []string{"3l4b6g6qbvs2a", "3l4b6g6qbvs2b", "self"} {
			coll := "app.bsky.feed.post"
			rec := fmt.Sprintf(`{"$type":"app.bsky.feed.post","text":"post %d","createdAt":"2026-11-30T12:00:00.000Z"}`, i)
			if rkey == "self" {
				coll = "app.bsky.actor.profile"
				rec = `{"$type":"app.bsky.actor.profile","displayName":"` + a.Handle + `"}`
			}
			p.mustCall(tb, fuzzCall{NSID: "com.atproto.repo.putRecord", Auth: "Bearer " + a.Access,
				Body: `{"repo":"` + a.DID + `","collection":"` + coll + `","rkey":"` + rkey + `","record":` + rec + `}`})
		}
	}
}

// renew replaces the server with a fresh one in the seeded state: after a
// call that deleted, took down or re-keyed an account, later inputs would
// otherwise all fail the same way.
func (p *fuzzPDS) renew(tb testing.TB) {
	tb.Helper()
	p.s.Close()
	p.known = ""
	p.open(tb)
}

func (p *fuzzPDS) seedAccount(tb testing.TB, name string) fuzzAccount {
	a := fuzzAccount{Handle: name + ".test", Email: name + "@example.com", Password: name + "-password"}
	r := p.mustCall(tb, fuzzCall{NSID: "com.atproto.server.createAccount",
		Body: fmt.Sprintf(`{"handle":%q,"email":%q,"password":%q}`, a.Handle, a.Email, a.Password)})
	var out struct{ Did, AccessJwt, RefreshJwt string }
	if err := json.Unmarshal(r.Body, &out); err != nil {
		tb.Fatal(err)
	}
	a.DID, a.Access, a.Refresh = out.Did, out.AccessJwt, out.RefreshJwt
	return a
}

// expand puts this server's values in place of an input's placeholders:
// $alice and $bob (DIDs), $alice.access-style tokens and $admin (the
// admin's Authorization header), so a corpus
// written against one server means the same on every other.
func (p *fuzzPDS) expand(s string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	return strings.NewReplacer(
		"$alice.refresh", p.alice.Refresh, "$alice.access", p.alice.Access,
		"$bob.refresh", p.bob.Refresh, "$bob.access", p.bob.Access,
		"$alice", p.alice.DID, "$bob", p.bob.DID, "$admin", p.admin,
	).Replace(s)
}

// authKinds are the credentials an input can pick by number: the owner's
// session, none, another account's, the wrong kind of token, the admin's,
// garbage.
const authKinds = 6

func (p *fuzzPDS) auth(k uint8) string {
	switch k % authKinds {
	case 0:
		return "Bearer " + p.alice.Access
	case 1:
		return ""
	case 2:
		return "Bearer " + p.bob.Access
	case 3:
		return "Bearer " + p.alice.Refresh
	case 4:
		return p.admin
	}
	return "Bearer eyJhbGciOiJIUzI1NiJ9.e30.garbage"
}

// seedAuth is the auth kind a seed of nsid uses: the admin's for the
// admin methods and invite code creation, alice's session otherwise.
func seedAuth(nsid string) uint8 {
	if strings.HasPrefix(nsid, "com.atproto.admin.") || strings.HasPrefix(nsid, "com.atproto.server.createInviteCode") {
		return 4
	}
	return 0
}

// addTableSeeds adds the seeds of a target whose input picks a method of
// its table by number: each seed of method i as (i, seedAuth's credential,
// seed), and its first seed again without credentials.
func addTableSeeds(f *testing.F, n int, method func(i int) (nsid string, seeds []string)) {
	for i := range n {
		nsid, seeds := method(i)
		for _, s := range seeds {
			f.Add(uint8(i), seedAuth(nsid), s)
		}
		f.Add(uint8(i), uint8(1), seeds[0])
	}
}

// fuzzCall is one XRPC request. A call with a Body is a POST of
// ContentType (application/json when empty); one without is a GET.
type fuzzCall struct {
	NSID        string
	Query       string // raw, after the "?"
	Auth        string
	ContentType string
	Body        string
	NoBody      bool // a POST with no body at all
}

type fuzzReply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (c fuzzCall) String() string {
	s := c.NSID
	if c.Query != "" {
		s += "?" + c.Query
	}
	if c.Body != "" {
		b := c.Body
		if len(b) > 2000 {
			b = b[:2000] + "..."
		}
		s += fmt.Sprintf(" body %q", b)
	}
	return s
}

func (c fuzzCall) request() (*http.Request, error) {
	target := "/xrpc/" + c.NSID
	if c.Query != "" {
		target += "?" + c.Query
	}
	method := http.MethodGet
	var body *strings.Reader
	if c.Body != "" || c.NoBody {
		method = http.MethodPost
		body = strings.NewReader(c.Body)
	}
	var req *http.Request
	var err error
	if body != nil {
		req, err = http.NewRequest(method, "http://pds.test"+target, body)
	} else {
		req, err = http.NewRequest(method, "http://pds.test"+target, nil)
	}
	if err != nil {
		return nil, err
	}
	if c.NoBody {
		req.Body, req.ContentLength = http.NoBody, 0
	} else if body != nil {
		ct := c.ContentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if c.Auth != "" {
		req.Header.Set("Authorization", c.Auth)
	}
	return req, nil
}

// do serves one call through the server's Handler, bounded by
// callTimeout. ok is false when the call cannot be sent at all (a target
// no HTTP request can carry); such inputs are skipped, not failures.
func (p *fuzzPDS) do(tb testing.TB, c fuzzCall) (r fuzzReply, ok bool) {
	tb.Helper()
	req, err := c.request()
	if err != nil {
		return r, false
	}
	return p.serve(tb, c.String(), req), true
}

func (p *fuzzPDS) serve(tb testing.TB, what string, req *http.Request) fuzzReply {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if p.remote != nil {
		return p.remote.serve(tb, what, req.WithContext(ctx))
	}
	rec := httptest.NewRecorder()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		p.s.Handler().ServeHTTP(rec, req.WithContext(ctx))
	}()
	select {
	case v := <-done:
		if v != nil {
			tb.Fatalf("%s: panic: %v", what, v)
		}
	case <-time.After(callTimeout + time.Second):
		tb.Fatalf("%s: no answer within %v (a hang)", what, callTimeout)
	}
	return fuzzReply{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// mustCall is a setup call that has to succeed.
func (p *fuzzPDS) mustCall(tb testing.TB, c fuzzCall) fuzzReply {
	tb.Helper()
	r, ok := p.do(tb, c)
	if !ok || r.Status != 200 {
		tb.Fatalf("%s: %d %s", c, r.Status, r.Body)
	}
	return r
}

// state is what a failed call must leave as it was: every repo's head,
// rev and status (active, deactivated, taken down), the accounts as an admin sees them, their preferences
// and app passwords, the invite codes and the firehose's last seq.
func (p *fuzzPDS) state(tb testing.TB) string {
	tb.Helper()
	var b strings.Builder
	get := func(c fuzzCall) {
		r, _ := p.do(tb, c)
		fmt.Fprintf(&b, "%s: %d %s\n", c.NSID, r.Status, r.Body)
	}
	get(fuzzCall{NSID: "com.atproto.sync.listRepos", Query: "limit=1000"})
	get(fuzzCall{NSID: "com.atproto.admin.getAccountInfos", Query: "dids=" + p.alice.DID + "&dids=" + p.bob.DID, Auth: p.admin})
	get(fuzzCall{NSID: "com.atproto.admin.getInviteCodes", Query: "limit=500", Auth: p.admin})
	for _, a := range []fuzzAccount{p.alice, p.bob} {
		get(fuzzCall{NSID: "app.bsky.actor.getPreferences", Auth: "Bearer " + a.Access})
		get(fuzzCall{NSID: "com.atproto.server.listAppPasswords", Auth: "Bearer " + a.Access})
	}
	if p.s != nil {
		seq, err := p.s.Seq(context.Background())
		fmt.Fprintf(&b, "seq: %d %v\n", seq, err)
	}
	return b.String()
}

// check sends c and holds the invariant of every fuzz target: the answer
// is a success or a 4xx XRPC error envelope with a name (a 5xx only where
// the reference answers one too: matchedOdd), within callTimeout, without
// a panic; and a call that failed changed nothing stored. It returns the
// reply, and ok false when c could not be sent.
func (p *fuzzPDS) check(t *testing.T, c fuzzCall) (fuzzReply, bool) {
	t.Helper()
	return p.run(t, c, false)
}

// checkRead is check for a call that must change nothing stored even when
// it succeeds: a query.
func (p *fuzzPDS) checkRead(t *testing.T, c fuzzCall) (fuzzReply, bool) {
	t.Helper()
	return p.run(t, c, true)
}

func (p *fuzzPDS) run(t *testing.T, c fuzzCall, read bool) (fuzzReply, bool) {
	t.Helper()
	before := p.known
	if before == "" {
		before = p.state(t)
	}
	p.logs.reset()
	r, ok := p.do(t, c)
	if !ok {
		p.known = before
		return r, false
	}
	switch {
	case r.Status >= 200 && r.Status < 300:
		if !read {
			p.known = ""
			return r, true
		}
	case r.Status >= 500:
		if r.Status != 500 || p.matchedOdd(t, c) == "" {
			t.Fatalf("%s: %d %s\nserver log: %s", c, r.Status, r.Body, p.logs)
		}
	case r.Status >= 400:
		var e struct {
			Error   *string `json:"error"`
			Message *string `json:"message"`
		}
		if err := json.Unmarshal(r.Body, &e); err != nil || e.Error == nil || *e.Error == "" {
			t.Fatalf("%s: %d with no XRPC error envelope: %q", c, r.Status, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("%s: %d error as %q", c, r.Status, ct)
		}
	default:
		t.Fatalf("%s: status %d", c, r.Status)
	}
	after := p.state(t)
	if after != before {
		t.Fatalf("%s answered %d %s but changed stored data:\nbefore:\n%s\nafter:\n%s", c, r.Status, r.Body, before, after)
	}
	p.known = after
	return r, true
}

// errorLog keeps the server's warnings and errors (a recovered panic's
// stack among them) to show with a failure.
type errorLog struct {
	mu   sync.Mutex
	recs []string
	errs []error // the "err" of each record
}

func (l *errorLog) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelWarn }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	b.WriteString(r.Message)
	var errs []error
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		if err, ok := a.Value.Any().(error); ok {
			errs = append(errs, err)
		}
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, b.String())
	l.errs = append(l.errs, errs...)
	l.mu.Unlock()
	return nil
}
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }
func (l *errorLog) reset() {
	l.mu.Lock()
	l.recs, l.errs = nil, nil
	l.mu.Unlock()
}
func (l *errorLog) causes() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

func (l *errorLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.recs, "\n")
}

// pipeListener serves an http.Server over in-memory pipes, for the
// firehose target: a WebSocket needs a connection to hijack, not a socket.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// Dial is a net.Dialer's DialContext for the listener.
func (l *pipeListener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// oddCases are the inputs the reference PDS answers with a 500 (checked
// against npm @atproto/pds 0.5.35), so fakepds does too; each is in
// docs/known-differences.md, "Matched although odd". A case is told by the
// input, or by the error fakepds logged for the 500 (its cause), never by
// the answer alone.
var oddCases = []struct {
	name string
	is   func(p *fuzzPDS, t *testing.T, c fuzzCall, causes []error) bool
}{
	{"a record the reference's data model cannot hold", func(_ *fuzzPDS, _ *testing.T, c fuzzCall, _ []error) bool { return internalRecord(c) }},
	{"a create of a record that exists", func(_ *fuzzPDS, _ *testing.T, _ fuzzCall, causes []error) bool {
		return anyIs(causes, repo.ErrRecordExists)
	}},
	{"an applyWrites update of a missing record", func(_ *fuzzPDS, _ *testing.T, c fuzzCall, causes []error) bool {
		return c.NSID == "com.atproto.repo.applyWrites" && anyIs(causes, repo.ErrRecordNotFound)
	}},
	{"an applyWrites delete of a missing record", func(p *fuzzPDS, t *testing.T, c fuzzCall, _ []error) bool {
		return c.NSID == "com.atproto.repo.applyWrites" && deletesMissing(p, t, c)
	}},
	{"admin.updateAccountEmail to an address another account holds", func(_ *fuzzPDS, _ *testing.T, c fuzzCall, causes []error) bool {
		return c.NSID == "com.atproto.admin.updateAccountEmail" && anyIs(causes, account.ErrEmailTaken)
	}},
	{"createAppPassword with a name in use", appPasswordTaken},
	{"an admin subject in a repo this PDS does not hold", unheldSubject},
	{"a service JWT whose header or payload is not JSON, on an admin method", func(_ *fuzzPDS, _ *testing.T, c fuzzCall, _ []error) bool {
		return badServiceJWT(c)
	}},
	{"an importRepo CAR that does not read as a repo", func(_ *fuzzPDS, _ *testing.T, c fuzzCall, causes []error) bool {
		return c.NSID == "com.atproto.repo.importRepo" && anyIs(causes, repo.ErrUnreadableRepo)
	}},
}

// matchedOdd names the odd case a 500 answer to c is, or "".
func (p *fuzzPDS) matchedOdd(t *testing.T, c fuzzCall) string {
	causes := p.logs.causes()
	for _, o := range oddCases {
		if o.is(p, t, c, causes) {
			return o.name
		}
	}
	return ""
}

func anyIs(errs []error, target error) bool {
	return slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, target) })
}

// writeBody is the part of a repo write's input the odd cases look at.
type writeBody struct {
	Repo       string
	Collection string
	Rkey       string
	Record     json.RawMessage
	Writes     []struct {
		Type       string `json:"$type"`
		Collection string
		Rkey       string
		Value      json.RawMessage
	}
}

// internalRecord: a record with a number beyond JavaScript's safe integers
// or a legacy blob with a non-raw CID fails the reference's conversion
// with a plain error, a 500. lexval.Prepare tells them: any error but a
// *lexval.Error (pds/lexval's reference test checks it against the
// reference's answers).
func internalRecord(c fuzzCall) bool {
	var in writeBody
	if json.Unmarshal([]byte(c.Body), &in) != nil {
		return false
	}
	internal := func(coll, rkey string, rec json.RawMessage) bool {
		if rkey == "" {
			rkey = "3l4b6g6qbvs2a"
		}
		nsid, err1 := syntax.ParseNSID(coll)
		rk, err2 := syntax.ParseRecordKey(rkey)
		if err1 != nil || err2 != nil || rec == nil {
			return false
		}
		_, err := lexval.Prepare(nsid, rk, rec, nil)
		var le *lexval.Error
		return err != nil && !errors.As(err, &le)
	}
	if internal(in.Collection, in.Rkey, in.Record) {
		return true
	}
	for _, w := range in.Writes {
		if internal(w.Collection, w.Rkey, w.Value) {
			return true
		}
	}
	return false
}

// deletesMissing: an applyWrites delete of a record the repo does not
// hold (and no earlier write of the call creates).
func deletesMissing(p *fuzzPDS, t *testing.T, c fuzzCall) bool {
	var in writeBody
	if json.Unmarshal([]byte(c.Body), &in) != nil {
		return false
	}
	created := map[string]bool{}
	for _, w := range in.Writes {
		path := w.Collection + "/" + w.Rkey
		switch w.Type {
		case "com.atproto.repo.applyWrites#create":
			created[path] = true
		case "com.atproto.repo.applyWrites#delete":
			if created[path] {
				continue
			}
			r, _ := p.do(t, fuzzCall{NSID: "com.atproto.repo.getRecord",
				Query: "repo=" + url.QueryEscape(in.Repo) + "&collection=" + url.QueryEscape(w.Collection) + "&rkey=" + url.QueryEscape(w.Rkey)})
			if r.Status == 400 {
				return true // RecordNotFound
			}
		}
	}
	return false
}

// appPasswordTaken: createAppPassword with a name the account already
// uses.
func appPasswordTaken(p *fuzzPDS, t *testing.T, c fuzzCall, _ []error) bool {
	if c.NSID != "com.atproto.server.createAppPassword" {
		return false
	}
	var in struct{ Name string }
	if json.Unmarshal([]byte(c.Body), &in) != nil {
		return false
	}
	l, _ := p.do(t, fuzzCall{NSID: "com.atproto.server.listAppPasswords", Auth: c.Auth})
	var out struct{ Passwords []struct{ Name string } }
	_ = json.Unmarshal(l.Body, &out)
	return slices.ContainsFunc(out.Passwords, func(p struct{ Name string }) bool { return p.Name == in.Name })
}

// unheldSubject: updateSubjectStatus of a record or blob whose repo this
// PDS does not hold (an unknown DID, or a handle in the URI), or
// getSubjectStatus of a record URI naming its repo by handle: the
// reference fails to open an actor store for it.
func unheldSubject(p *fuzzPDS, _ *testing.T, c fuzzCall, _ []error) bool {
	held := func(repo string) bool { return repo == p.alice.DID || repo == p.bob.DID }
	switch c.NSID {
	case "com.atproto.admin.getSubjectStatus":
		q, err := url.ParseQuery(c.Query)
		if err != nil || q.Get("blob") != "" {
			return false
		}
		uri, err := syntax.ParseATURI(q.Get("uri"))
		return err == nil && !uri.Authority().IsDID()
	case "com.atproto.admin.updateSubjectStatus":
		var in struct {
			Subject struct {
				Type string `json:"$type"`
				URI  string
				DID  string
			}
		}
		if json.Unmarshal([]byte(c.Body), &in) != nil {
			return false
		}
		switch in.Subject.Type {
		case "com.atproto.repo.strongRef":
			uri, err := syntax.ParseATURI(in.Subject.URI)
			return err == nil && !held(uri.Authority().String())
		case "com.atproto.admin.defs#repoBlobRef":
			return !held(in.Subject.DID)
		}
	}
	return false
}

// badServiceJWT: on a method a moderation service may call (the admin
// methods), a Bearer token that is not a session token is read as a
// service JWT, and a header or payload that is not JSON fails the
// reference's JSON.parse with a plain error. The header is read first:
// one that is JSON but no object with an "alg", or of a session type, is
// refused before the payload is read.
func badServiceJWT(c fuzzCall) bool {
	scheme, token, _ := strings.Cut(c.Auth, " ")
	if !strings.HasPrefix(c.NSID, "com.atproto.admin.") || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	segment := func(s string) (map[string]any, bool) {
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
		if err != nil || !json.Valid(b) {
			return nil, false
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m, true
	}
	hdr, ok := segment(parts[0])
	if !ok {
		return true
	}
	if _, alg := hdr["alg"].(string); !alg {
		return false
	}
	if typ, _ := hdr["typ"].(string); typ == "at+jwt" || typ == "refresh+jwt" || typ == "dpop+jwt" {
		return false
	}
	_, ok = segment(parts[1])
	return !ok
}
