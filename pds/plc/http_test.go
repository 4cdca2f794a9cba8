package plc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
	"github.com/fakepds/fakepds/pds/plc"
)

// TestSubmitRefused posts operations the public directory refuses and
// expects its status and body; operations Go can express go through
// Directory.Submit too, which must agree and name the kind.
func TestSubmitRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	ctx := t.Context()
	a := createAccount(t, f.dir, "alice.test")
	gone := createAccount(t, f.dir, "gone.test")
	f.clock.Advance(time.Second)
	tomb, err := plc.CreateTombstone(gone.genesis, gone.rotation)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.dir.Submit(ctx, gone.did, tomb); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)

	update := func(signer atcrypto.PrivateKey, edit func(*didplc.RegularOp)) *didplc.RegularOp {
		op, err := plc.CreateUpdate(a.genesis, signer, plc.Fields{Handle: "alice2.test"})
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(op)
		}
		return op
	}
	resign := func(op *didplc.RegularOp) *didplc.RegularOp {
		if err := op.Sign(a.rotation); err != nil {
			t.Fatal(err)
		}
		return op
	}
	freshDID, fresh, err := plc.CreateGenesis(newKey(t), plc.Fields{Handle: "fresh.test"})
	if err != nil {
		t.Fatal(err)
	}
	strangerSigned := func() *didplc.RegularOp {
		op := *fresh
		op.Sig = nil
		if err := op.Sign(newKey(t)); err != nil { // not one of its rotation keys
			t.Fatal(err)
		}
		return &op
	}()
	strangerDID, err := strangerSigned.DID()
	if err != nil {
		t.Fatal(err)
	}
	lateTomb, err := plc.CreateTombstone(a.genesis, a.rotation)
	if err != nil {
		t.Fatal(err)
	}
	afterTomb, err := plc.CreateUpdate(gone.genesis, gone.rotation, plc.Fields{Handle: "back.test"})
	if err != nil {
		t.Fatal(err)
	}
	afterTomb.Prev = new(tomb.CID().String())
	if err := afterTomb.Sign(gone.rotation); err != nil {
		t.Fatal(err)
	}
	endpoints := make(map[string]didplc.OpService)
	for i := range 10 {
		endpoints[fmt.Sprint("s", i)] = didplc.OpService{Type: "t", Endpoint: "https://" + strings.Repeat("e", 400)}
	}
	akas := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("at://h%d.test", i)
		}
		return out
	}

	const (
		notValid   = "Not a valid operation: "
		badSig     = "Invalid signature on op: "
		misordered = "Operations not correctly ordered"
	)
	for _, tc := range []struct {
		name        string
		did         syntax.DID
		op          any    // a didplc.Operation, or a raw body
		contentType string // application/json when empty
		status      int
		message     string // exact; a trailing "…" makes it a prefix
		kind        error  // for Directory.Submit, when op is an Operation
	}{
		{name: "bad signature", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.AlsoKnownAs[0] = "at://tampered.test" }),
			status: 400, message: badSig + "…", kind: plc.ErrInvalidSignature},
		{name: "not signed by a rotation key", did: a.did, op: update(a.signing, nil),
			status: 400, message: badSig + "…", kind: plc.ErrInvalidSignature},
		{name: "wrong prev", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) {
			op.Prev = new(fresh.CID().String())
			resign(op)
		}), status: 400, message: misordered, kind: plc.ErrMisordered},
		{name: "no prev for an existing DID", did: a.did, op: a.genesis, status: 400, message: misordered, kind: plc.ErrMisordered},
		{name: "genesis under another DID", did: "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", op: fresh,
			status: 400, message: "Hash of genesis operation does not match DID identifier: " + string(freshDID), kind: plc.ErrGenesisHash},
		{name: "update of an unknown DID", did: "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", op: update(a.rotation, nil),
			status: 400, message: "Hash of genesis operation does not match DID identifier: …", kind: plc.ErrGenesisHash},
		{name: "genesis not signed by its rotation key", did: syntax.DID(strangerDID), op: strangerSigned,
			status: 400, message: badSig + "…", kind: plc.ErrInvalidSignature},
		{name: "tombstone of an unknown DID", did: "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", op: lateTomb, status: 400, message: misordered, kind: plc.ErrMisordered},
		{name: "update after a tombstone", did: gone.did, op: afterTomb, status: 400, message: misordered, kind: plc.ErrMisordered},
		{name: "padded signature", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.Sig = new(*op.Sig + "=") }),
			status: 400, message: badSig + "…", kind: plc.ErrInvalidSignature},
		// The reference's base64 decoder throws a plain Error: a 500.
		{name: "signature not base64url", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.Sig = new("+" + (*op.Sig)[1:]) }),
			status: 500, message: "Internal Server Error", kind: plc.ErrInvalidSignature},
		{name: "legacy create", did: a.did, op: &didplc.LegacyOp{Type: "create", SigningKey: "k", RecoveryKey: "k", Handle: "h", Service: "s", Sig: new("x")},
			status: 400, message: notValid + "…", kind: plc.ErrInvalidOperation},
		{name: "unsigned", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.Sig = nil }),
			status: 400, message: notValid + "…", kind: plc.ErrInvalidOperation},
		{name: "null alsoKnownAs", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.AlsoKnownAs = nil }),
			status: 400, message: notValid + "…", kind: plc.ErrInvalidOperation},
		{name: "no type", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.Type = "" }),
			status: 400, message: notValid + "…", kind: plc.ErrInvalidOperation},
		{name: "unknown field", did: a.did, op: []byte(`{"type":"plc_tombstone","prev":"x","sig":"y","extra":1}`),
			status: 400, message: notValid + `{"type":"plc_tombstone","prev":"x","sig":"y","extra":1}`},
		{name: "number for a key", did: a.did, op: []byte(`{"type":"plc_operation","rotationKeys":[1],"verificationMethods":{},"alsoKnownAs":[],"services":{},"prev":null,"sig":"x"}`),
			status: 400, message: notValid + "…"},
		{name: "array", did: a.did, op: []byte(` [ ] `), status: 400, message: notValid + "[]"},
		{name: "too many alsoKnownAs", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.AlsoKnownAs = akas(11) }),
			status: 400, message: "To many alsoKnownAs entries (max 10)", kind: plc.ErrInvalidOperation},
		{name: "duplicate alsoKnownAs", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.AlsoKnownAs = []string{"at://x.test", "at://x.test"} }),
			status: 400, message: "duplicate alsoKnownAs entry: at://x.test", kind: plc.ErrInvalidOperation},
		{name: "long alsoKnownAs", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.AlsoKnownAs = []string{"at://" + strings.Repeat("h", 254)} }),
			status: 400, message: "alsoKnownAs entry too long (max 258): at://" + strings.Repeat("h", 254), kind: plc.ErrInvalidOperation},
		{name: "bad rotation key", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.RotationKeys = []string{"did:key:zfoo"} }),
			status: 400, message: "Invalid rotationKey: did:key:zfoo", kind: plc.ErrInvalidOperation},
		{name: "bad verification key", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.VerificationMethods["atproto"] = "zQ3sh" }),
			status: 400, message: "Invalid verificationMethod key: zQ3sh", kind: plc.ErrInvalidOperation},
		{name: "long service id", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.Services[strings.Repeat("i", 33)] = didplc.OpService{} }),
			status: 400, message: "Service id too long (max 32): " + strings.Repeat("i", 33), kind: plc.ErrInvalidOperation},
		{name: "too large", did: a.did, op: update(a.rotation, func(op *didplc.RegularOp) { op.Services = endpoints }),
			status: 400, message: "Operation too large (4000 bytes maximum in cbor encoding)", kind: plc.ErrInvalidOperation},
		// express.json() leaves other bodies unparsed: an empty object.
		{name: "not JSON", did: a.did, op: mustJSON(t, a.genesis), contentType: "text/plain", status: 400, message: notValid + "{}"},
		{name: "JSON null", did: a.did, op: []byte(`null`), status: 400, message: "Unexpected token n in JSON at position 0"},
		{name: "malformed JSON", did: a.did, op: []byte(`{"type":`), status: 400, message: "unexpected end of JSON input"},
		{name: "body over 100kb", did: a.did, op: []byte(`{"x":"` + strings.Repeat("x", 100<<10) + `"}`), status: 413, message: "request entity too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, isRaw := tc.op.([]byte)
			if !isRaw {
				body = mustJSON(t, tc.op)
			}
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			res := do(t, http.MethodPost, f.srv.URL+"/"+string(tc.did), ct, body)
			if res.status != tc.status || res.header.Get("Content-Type") != "application/json; charset=utf-8" {
				t.Fatalf("%d %s %s, want %d", res.status, res.header.Get("Content-Type"), res.body, tc.status)
			}
			msg := res.message(t)
			want, isPrefix := strings.CutSuffix(tc.message, "…")
			if isPrefix && (want == badSig || want == notValid) {
				// The reference quotes the operation as the client sent it.
				want, isPrefix = want+string(body), false
			}
			if isPrefix && !strings.HasPrefix(msg, want) || !isPrefix && msg != want {
				t.Fatalf("message %q, want %q", msg, want)
			}

			op, ok := tc.op.(didplc.Operation)
			if !ok || tc.contentType != "" {
				return
			}
			err := f.dir.Submit(ctx, tc.did, op)
			var opErr *plc.OpError
			if !errors.As(err, &opErr) || !errors.Is(err, tc.kind) {
				t.Fatalf("Submit: %v, want an *OpError of kind %v", err, tc.kind)
			}
			if opErr.Status != res.status || opErr.Message != msg {
				t.Fatalf("Submit: %d %q, HTTP: %d %q", opErr.Status, opErr.Message, res.status, msg)
			}
		})
	}

	// Nothing refused was stored.
	audit, err := f.dir.AuditLog(ctx, a.did)
	if err != nil || len(audit) != 1 {
		t.Fatalf("audit log of %s after refusals: %d entries, %v", a.did, len(audit), err)
	}
}

func TestTombstonedAndUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	a := createAccount(t, f.dir, "gone.test")
	f.clock.Advance(time.Second)
	tomb, err := plc.CreateTombstone(a.genesis, a.rotation)
	if err != nil {
		t.Fatal(err)
	}
	if res := f.post(t, string(a.did), tomb); res.status != 200 || string(res.body) != "OK" {
		t.Fatalf("tombstone: %d %s", res.status, res.body)
	}
	unknown := "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"
	notRegistered := `{"message":"DID not registered: ` + unknown + `"}`
	notAvailable := `{"message":"DID not available: ` + string(a.did) + `"}`
	for _, tc := range []struct {
		path   string
		status int
		body   string // exact, when set
	}{
		{"/" + string(a.did), 410, notAvailable},
		{"/" + string(a.did) + "/data", 410, notAvailable},
		{"/" + string(a.did) + "/log/last", 200, string(mustJSON(t, tomb))},
		{"/" + string(a.did) + "/log", 200, "[" + string(mustJSON(t, a.genesis)) + "," + string(mustJSON(t, tomb)) + "]"},
		{"/" + string(a.did) + "/log/audit", 200, ""},
		{"/" + unknown, 404, notRegistered},
		{"/" + unknown + "/data", 404, notRegistered},
		{"/" + unknown + "/log", 404, notRegistered},
		{"/" + unknown + "/log/audit", 404, notRegistered},
		{"/" + unknown + "/log/last", 404, notRegistered},
		// The directory does not check DID syntax: anything unknown is a 404.
		{"/not-a-did", 404, `{"message":"DID not registered: not-a-did"}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			res := f.get(t, tc.path)
			if res.status != tc.status || tc.body != "" && string(res.body) != tc.body {
				t.Fatalf("%d %s\nwant %d %s", res.status, res.body, tc.status, tc.body)
			}
			if ct := res.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Fatalf("Content-Type %s", ct)
			}
		})
	}
}

// TestDocument checks the document's exact JSON: contexts by key type,
// relative service ids, entries in the directory's (jsonb) order, and a
// verification key of a type no library here parses, published as is.
func TestDocument(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	rot := newKey(t)
	p256, err := atcrypto.GeneratePrivateKeyP256()
	if err != nil {
		t.Fatal(err)
	}
	k256 := didKey(t, newKey(t))
	const ed25519 = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
	// Extra entries are added after CreateGenesis, so the op is signed again.
	_, op, err := plc.CreateGenesis(rot, plc.Fields{SigningKey: k256, Handle: "doc.test", PDS: "pds.example.test"})
	if err != nil {
		t.Fatal(err)
	}
	op.VerificationMethods["atproto_label"] = didKey(t, p256)
	op.VerificationMethods["ed"] = ed25519
	op.Services["bsky_fg"] = didplc.OpService{Type: "BskyFeedGenerator", Endpoint: "https://fg.example.test"}
	op.Sig = nil
	if err := op.Sign(rot); err != nil {
		t.Fatal(err)
	}
	d, err := op.DID()
	if err != nil {
		t.Fatal(err)
	}
	did := syntax.DID(d)
	if res := f.post(t, d, op); res.status != 200 {
		t.Fatalf("submit: %d %s", res.status, res.body)
	}

	res := f.get(t, "/"+d)
	if ct := res.header.Get("Content-Type"); res.status != 200 || ct != "application/did+ld+json; charset=utf-8" {
		t.Fatalf("%d %s %s", res.status, ct, res.body)
	}
	want := `{"@context":["https://www.w3.org/ns/did/v1","https://w3id.org/security/multikey/v1",` +
		`"https://w3id.org/security/suites/secp256k1-2019/v1","https://w3id.org/security/suites/ecdsa-2019/v1"],` +
		`"id":"` + d + `","alsoKnownAs":["at://doc.test"],"verificationMethod":[` +
		`{"id":"` + d + `#ed","type":"Multikey","controller":"` + d + `","publicKeyMultibase":"` + strings.TrimPrefix(ed25519, "did:key:") + `"},` +
		`{"id":"` + d + `#atproto","type":"Multikey","controller":"` + d + `","publicKeyMultibase":"` + strings.TrimPrefix(k256, "did:key:") + `"},` +
		`{"id":"` + d + `#atproto_label","type":"Multikey","controller":"` + d + `","publicKeyMultibase":"` + strings.TrimPrefix(didKey(t, p256), "did:key:") + `"}],` +
		`"service":[{"id":"#bsky_fg","type":"BskyFeedGenerator","serviceEndpoint":"https://fg.example.test"},` +
		`{"id":"#atproto_pds","type":"AtprotoPersonalDataServer","serviceEndpoint":"https://pds.example.test"}]}`
	if string(res.body) != want {
		t.Fatalf("document\n%s\nwant\n%s", res.body, want)
	}
	doc, err := f.dir.Resolve(t.Context(), did)
	if err != nil {
		t.Fatal(err)
	}
	if b := mustJSON(t, doc); !bytes.Equal(b, res.body) {
		t.Fatalf("Resolve and GET differ:\n%s\n%s", b, res.body)
	}
}

func TestExport(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	t0 := f.clock.Now()
	var accounts []*account
	for _, h := range []string{"a.test", "b.test", "c.test"} {
		accounts = append(accounts, createAccount(t, f.dir, h))
		f.clock.Advance(time.Second)
	}
	update, err := plc.CreateUpdate(accounts[0].genesis, accounts[0].rotation, plc.Fields{Handle: "a2.test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.dir.Submit(t.Context(), accounts[0].did, update); err != nil {
		t.Fatal(err)
	}
	type line struct {
		DID       string          `json:"did"`
		CID       string          `json:"cid"`
		CreatedAt string          `json:"createdAt"`
		Operation json.RawMessage `json:"operation"`
		Nullified *bool           `json:"nullified"`
		Seq       *int64          `json:"seq"`
		Type      string          `json:"type"`
	}
	all := []struct {
		did syntax.DID
		op  didplc.Operation
	}{{accounts[0].did, accounts[0].genesis}, {accounts[1].did, accounts[1].genesis}, {accounts[2].did, accounts[2].genesis}, {accounts[0].did, update}}
	at := func(i int) string { return t0.Add(time.Duration(i) * time.Second).Format(plc.TimeFormat) }

	for _, tc := range []struct {
		query  string
		status int
		first  int  // index in all of the first line
		n      int  // lines
		seq    bool // sequenced lines
		msg    string
	}{
		{query: "", status: 200, first: 0, n: 4},
		{query: "?count=2", status: 200, first: 0, n: 2},
		{query: "?count=%202x", status: 200, first: 0, n: 2}, // parseInt(" 2x") is 2
		{query: "?count=1&count=2", status: 200, first: 0, n: 4},
		{query: "?count=5000", status: 200, first: 0, n: 4},
		{query: "?after=" + at(1), status: 200, first: 2, n: 2},
		{query: "?after=" + at(1) + "&count=1", status: 200, first: 2, n: 1},
		{query: "?after=" + at(9), status: 200, n: 0},
		{query: "?after=2", status: 200, first: 2, n: 2, seq: true},
		{query: "?after=0&count=3", status: 200, first: 0, n: 3, seq: true},
		{query: "?after=99999999999999999999", status: 200, n: 0, seq: true},
		{query: "?count=0", status: 400, msg: "Invalid count parameter"},
		{query: "?count=-1", status: 400, msg: "Invalid count parameter"},
		{query: "?count=abc", status: 400, msg: "Invalid count parameter"},
		{query: "?after=yesterday", status: 400, msg: "Invalid after parameter"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			res := f.get(t, "/export"+tc.query)
			if res.status != tc.status {
				t.Fatalf("%d %s", res.status, res.body)
			}
			if tc.status != 200 {
				if msg := res.message(t); msg != tc.msg {
					t.Fatalf("message %q, want %q", msg, tc.msg)
				}
				return
			}
			if ct := res.header.Get("Content-Type"); ct != "application/jsonlines" {
				t.Fatalf("Content-Type %s", ct)
			}
			if tc.n == 0 {
				if len(res.body) != 0 {
					t.Fatalf("body %q, want none", res.body)
				}
				return
			}
			if bytes.HasSuffix(res.body, []byte("\n")) {
				t.Fatal("the last line ends with a newline; the reference joins lines")
			}
			lines := bytes.Split(res.body, []byte("\n"))
			if len(lines) != tc.n {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), tc.n, res.body)
			}
			for i, b := range lines {
				var l line
				if err := json.Unmarshal(b, &l); err != nil {
					t.Fatal(err)
				}
				w := all[tc.first+i]
				var op didplc.OpEnum
				if err := json.Unmarshal(l.Operation, &op); err != nil {
					t.Fatal(err)
				}
				if l.DID != string(w.did) || l.CID != w.op.CID().String() || op.AsOperation().CID() != w.op.CID() || l.CreatedAt != at(tc.first+i) {
					t.Errorf("line %d: %s", i, b)
				}
				if tc.seq {
					if l.Type != "sequenced_op" || l.Seq == nil || *l.Seq != int64(tc.first+i+1) || l.Nullified != nil {
						t.Errorf("sequenced line %d: %s", i, b)
					}
				} else if l.Type != "" || l.Seq != nil || l.Nullified == nil || *l.Nullified {
					t.Errorf("line %d: %s", i, b)
				}
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	for _, tc := range []struct {
		method, path string
		header       map[string]string
		status       int
		body         string // substring
	}{
		{method: "GET", path: "/_health", status: 200, body: `{"version":"fakepds"}`},
		{method: "GET", path: "/", status: 302, header: map[string]string{"Location": "https://web.plc.directory"}},
		{method: "PUT", path: "/did:plc:x", status: 404, body: "<pre>Cannot PUT /did:plc:x</pre>"},
		{method: "GET", path: "/a/b/c", status: 404, body: "<pre>Cannot GET /a/b/c</pre>"},
		{method: "OPTIONS", path: "/did:plc:x", status: 204,
			header: map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET,HEAD,PUT,PATCH,POST,DELETE"}},
		{method: "GET", path: "/did:plc:x", status: 404, header: map[string]string{"Access-Control-Allow-Origin": "*"}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			res := do(t, tc.method, f.srv.URL+tc.path, "", nil)
			if res.status != tc.status || !strings.Contains(string(res.body), tc.body) {
				t.Fatalf("%d %s, want %d containing %q", res.status, res.body, tc.status, tc.body)
			}
			for k, v := range tc.header {
				if got := res.header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
}
