package plc_test

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
	"github.com/fakepds/fakepds/pds/plc"
)

func TestGenesisDerivesRealDID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	a := createAccount(t, f.dir, "alice.test")

	// go-didplc's own derivation, and its own check of the entry as a
	// directory would serve it.
	want, err := a.genesis.DID()
	if err != nil {
		t.Fatal(err)
	}
	if string(a.did) != want {
		t.Fatalf("did %s, go-didplc derives %s", a.did, want)
	}
	if _, err := syntax.ParseDID(want); err != nil || a.did.Method() != "plc" || len(a.did.Identifier()) != 24 {
		t.Fatalf("not a did:plc: %s (%v)", a.did, err)
	}
	audit, err := f.dir.AuditLog(t.Context(), a.did)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].CID != a.genesis.CID().String() {
		t.Fatalf("audit log %+v", audit)
	}
	if err := audit[0].Validate(); err != nil {
		t.Fatalf("go-didplc refuses the entry: %v", err)
	}
}

// TestLookupThroughIndigo resolves a new account the way code under test
// does in production: indigo's identity directory pointed at a PLC URL.
func TestLookupThroughIndigo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	a := createAccount(t, f.dir, "alice.test")

	// Handle verification would query DNS for alice.test; the handle is
	// checked below as declared.
	base := identity.BaseDirectory{PLCURL: f.srv.URL, SkipHandleVerification: true}
	ident, err := base.LookupDID(t.Context(), a.did)
	if err != nil {
		t.Fatal(err)
	}
	checkIdentity(t, ident, a, "alice.test", testPDS)

	// The same identity from the Go API, without HTTP.
	doc, err := f.dir.Resolve(t.Context(), a.did)
	if err != nil {
		t.Fatal(err)
	}
	direct := doc.Identity()
	checkIdentity(t, &direct, a, "alice.test", testPDS)

	// go-didplc's client reads the same document.
	client := didplc.Client{DirectoryURL: f.srv.URL}
	gdoc, err := client.Resolve(t.Context(), string(a.did))
	if err != nil {
		t.Fatal(err)
	}
	if gdoc.ID != string(a.did) || !slices.Equal(gdoc.AlsoKnownAs, []string{"at://alice.test"}) {
		t.Fatalf("go-didplc client: %+v", gdoc)
	}
}

func checkIdentity(t *testing.T, ident *identity.Identity, a *account, handle, pds string) {
	t.Helper()
	if ident.DID != a.did {
		t.Errorf("DID %s, want %s", ident.DID, a.did)
	}
	if h, err := ident.DeclaredHandle(); err != nil || h != syntax.Handle(handle) {
		t.Errorf("declared handle %q (%v), want %q", h, err, handle)
	}
	if got := ident.PDSEndpoint(); got != pds {
		t.Errorf("PDS endpoint %q, want %q", got, pds)
	}
	pub, err := ident.PublicKey()
	if err != nil {
		t.Fatalf("atproto key: %v", err)
	}
	want, _ := a.signing.PublicKey()
	if !pub.Equal(want) {
		t.Errorf("atproto key %s, want %s", pub.DIDKey(), want.DIDKey())
	}
}

// TestUpdateHandle changes the handle through go-didplc's HTTP client and
// reads it back from every endpoint.
func TestUpdateHandle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	ctx := t.Context()
	a := createAccount(t, f.dir, "alice.test")
	genesisAt := f.clock.Now()

	f.clock.Advance(time.Minute)
	last, err := f.dir.Last(ctx, a.did)
	if err != nil {
		t.Fatal(err)
	}
	update, err := plc.CreateUpdate(last, a.rotation, plc.Fields{Handle: "alice2.test"})
	if err != nil {
		t.Fatal(err)
	}
	client := didplc.Client{DirectoryURL: f.srv.URL}
	if err := client.Submit(ctx, string(a.did), update); err != nil {
		t.Fatal(err)
	}

	// GET /{did}
	base := identity.BaseDirectory{PLCURL: f.srv.URL, SkipHandleVerification: true}
	ident, err := base.LookupDID(ctx, a.did)
	if err != nil {
		t.Fatal(err)
	}
	checkIdentity(t, ident, a, "alice2.test", testPDS)

	// GET /{did}/log: both operations, chained.
	ops, err := client.OpLog(ctx, string(a.did))
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].Regular == nil || ops[1].Regular == nil {
		t.Fatalf("log %+v", ops)
	}
	if ops[0].Regular.CID() != a.genesis.CID() || ops[1].Regular.CID() != update.CID() {
		t.Fatalf("log CIDs %s %s, want %s %s", ops[0].Regular.CID(), ops[1].Regular.CID(), a.genesis.CID(), update.CID())
	}
	if got := ops[1].Regular.PrevCIDStr(); got != a.genesis.CID().String() {
		t.Fatalf("update's prev %s, want the genesis CID", got)
	}

	// GET /{did}/log/audit: cid, createdAt from the clock, nullified.
	audit, err := client.AuditLog(ctx, string(a.did))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		cid       string
		createdAt time.Time
	}{{a.genesis.CID().String(), genesisAt}, {update.CID().String(), genesisAt.Add(time.Minute)}}
	if len(audit) != len(want) {
		t.Fatalf("audit log has %d entries", len(audit))
	}
	for i, w := range want {
		e := audit[i]
		if e.DID != string(a.did) || e.CID != w.cid || e.Nullified || e.CreatedAt != w.createdAt.UTC().Format(plc.TimeFormat) {
			t.Errorf("audit[%d] = {%s %s %v %s}, want {%s %s false %s}", i, e.DID, e.CID, e.Nullified, e.CreatedAt,
				a.did, w.cid, w.createdAt.Format(plc.TimeFormat))
		}
	}
	if err := didplc.VerifyOpLog(audit); err != nil {
		t.Fatalf("go-didplc refuses the audit log: %v", err)
	}

	// GET /{did}/log/last
	res := f.get(t, "/"+string(a.did)+"/log/last")
	var lastOp didplc.OpEnum
	if err := json.Unmarshal(res.body, &lastOp); err != nil || res.status != 200 {
		t.Fatalf("last: %d %s", res.status, res.body)
	}
	if lastOp.Regular == nil || lastOp.Regular.CID() != update.CID() {
		t.Fatalf("last %s, want the update", res.body)
	}

	// GET /{did}/data
	res = f.get(t, "/"+string(a.did)+"/data")
	var data plc.Data
	if err := json.Unmarshal(res.body, &data); err != nil || res.status != 200 {
		t.Fatalf("data: %d %s", res.status, res.body)
	}
	if data.DID != a.did || !slices.Equal(data.AlsoKnownAs, []string{"at://alice2.test"}) ||
		!slices.Equal(data.RotationKeys, a.genesis.RotationKeys) ||
		data.VerificationMethods["atproto"] != didKey(t, a.signing) ||
		data.Services["atproto_pds"] != (didplc.OpService{Type: "AtprotoPersonalDataServer", Endpoint: testPDS}) {
		t.Fatalf("data %s", res.body)
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	ctx := t.Context()
	a := createAccount(t, f.dir, "gone.test")
	tomb, err := plc.CreateTombstone(a.genesis, a.rotation)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	if err := f.dir.Submit(ctx, a.did, tomb); err != nil {
		t.Fatal(err)
	}
	unknown := syntax.DID("did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")

	for _, tc := range []struct {
		name string
		did  syntax.DID
		call func(syntax.DID) error
		want error
	}{
		{"resolve unknown", unknown, func(d syntax.DID) error { _, err := f.dir.Resolve(ctx, d); return err }, plc.ErrNotFound},
		{"data unknown", unknown, func(d syntax.DID) error { _, err := f.dir.Data(ctx, d); return err }, plc.ErrNotFound},
		{"last unknown", unknown, func(d syntax.DID) error { _, err := f.dir.Last(ctx, d); return err }, plc.ErrNotFound},
		{"log unknown", unknown, func(d syntax.DID) error { _, err := f.dir.Log(ctx, d); return err }, plc.ErrNotFound},
		{"audit unknown", unknown, func(d syntax.DID) error { _, err := f.dir.AuditLog(ctx, d); return err }, plc.ErrNotFound},
		{"resolve tombstoned", a.did, func(d syntax.DID) error { _, err := f.dir.Resolve(ctx, d); return err }, plc.ErrTombstoned},
		{"data tombstoned", a.did, func(d syntax.DID) error { _, err := f.dir.Data(ctx, d); return err }, plc.ErrTombstoned},
		{"last tombstoned", a.did, func(d syntax.DID) error {
			op, err := f.dir.Last(ctx, d)
			if _, ok := op.(*didplc.TombstoneOp); err == nil && !ok {
				return errors.New("last is not the tombstone")
			}
			return err
		}, nil},
		{"log tombstoned", a.did, func(d syntax.DID) error {
			ops, err := f.dir.Log(ctx, d)
			if err == nil && len(ops) != 2 {
				return errors.New("log does not hold genesis and tombstone")
			}
			return err
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(tc.did); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}

	// indigo tells a tombstoned DID from an unknown one by status alone.
	base := identity.BaseDirectory{PLCURL: f.srv.URL}
	if _, err := base.LookupDID(ctx, unknown); !errors.Is(err, identity.ErrDIDNotFound) {
		t.Errorf("indigo on an unknown DID: %v", err)
	}
	if _, err := base.LookupDID(ctx, a.did); !errors.Is(err, identity.ErrDIDResolutionFailed) {
		t.Errorf("indigo on a tombstoned DID: %v", err)
	}
}

// TestNullification: a more authoritative rotation key undoes what a less
// authoritative one did, within 72 hours, and only then.
func TestNullification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		wait    time.Duration // between the hijack and the recovery
		byPDS   bool          // recover with the PDS key instead of the recovery key
		wantErr error
	}{
		{name: "within 72h", wait: 72 * time.Hour},
		{name: "late", wait: 72*time.Hour + time.Millisecond, wantErr: plc.ErrLateRecovery},
		{name: "same key", wait: time.Hour, byPDS: true, wantErr: plc.ErrInvalidSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, plc.Options{})
			ctx := t.Context()
			recovery := newKey(t)
			a := createAccount(t, f.dir, "victim.test", didKey(t, recovery))

			f.clock.Advance(time.Minute)
			hijack, err := plc.CreateUpdate(a.genesis, a.rotation, plc.Fields{PDS: "https://evil.test"})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.dir.Submit(ctx, a.did, hijack); err != nil {
				t.Fatal(err)
			}

			f.clock.Advance(tc.wait)
			signer := recovery
			if tc.byPDS {
				signer = a.rotation
			}
			recovery2, err := plc.CreateUpdate(a.genesis, signer, plc.Fields{Handle: "recovered.test"})
			if err != nil {
				t.Fatal(err)
			}
			err = f.dir.Submit(ctx, a.did, recovery2)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("recovery: %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}

			audit, err := f.dir.AuditLog(ctx, a.did)
			if err != nil {
				t.Fatal(err)
			}
			var nullified []bool
			for _, e := range audit {
				nullified = append(nullified, e.Nullified)
			}
			if !slices.Equal(nullified, []bool{false, true, false}) {
				t.Fatalf("nullified %v", nullified)
			}
			if err := didplc.VerifyOpLog(audit); err != nil {
				t.Fatalf("go-didplc refuses the audit log: %v", err)
			}
			ops, err := f.dir.Log(ctx, a.did)
			if err != nil || len(ops) != 2 || ops[1].CID() != recovery2.CID() {
				t.Fatalf("log without the hijack: %v %v", ops, err)
			}
			doc, err := f.dir.Resolve(ctx, a.did)
			if err != nil {
				t.Fatal(err)
			}
			if id := doc.Identity(); id.PDSEndpoint() != testPDS {
				t.Fatalf("PDS %s after recovery", id.PDSEndpoint())
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		opts    plc.Options
		wantErr error
	}{
		{"enforced", plc.Options{}, plc.ErrRateLimited},
		{"lifted", plc.Options{NoRateLimit: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.opts)
			ctx := t.Context()
			a := createAccount(t, f.dir, "busy.test")
			update := func(i int) error {
				f.clock.Advance(time.Second)
				last, err := f.dir.Last(ctx, a.did)
				if err != nil {
					t.Fatal(err)
				}
				op, err := plc.CreateUpdate(last, a.rotation, plc.Fields{Handle: syntax.Handle("busy" + string(rune('a'+i)) + ".test")})
				if err != nil {
					t.Fatal(err)
				}
				return f.dir.Submit(ctx, a.did, op)
			}
			// Nine updates and the genesis: ten operations within the hour.
			for i := range 9 {
				if err := update(i); err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
			}
			err := update(9)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("11th operation within the hour: %v, want %v", err, tc.wantErr)
			}
			var opErr *plc.OpError
			if errors.As(err, &opErr) && (opErr.Status != 400 || opErr.Message != "To many operations within last hour (max 10)") {
				t.Fatalf("refusal %d %q", opErr.Status, opErr.Message)
			}
			if tc.wantErr != nil {
				f.clock.Advance(time.Hour)
				if err := update(10); err != nil {
					t.Fatalf("an hour later: %v", err)
				}
			}
		})
	}
}

func TestPersistence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	c := newClock()
	d, err := plc.Open(ctx, dir, plc.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	a := createAccount(t, d, "kept.test")
	c.Advance(time.Second)
	update, err := plc.CreateUpdate(a.genesis, a.rotation, plc.Fields{Handle: "kept2.test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Submit(ctx, a.did, update); err != nil {
		t.Fatal(err)
	}
	before, err := d.AuditLog(ctx, a.did)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d, err = plc.Open(ctx, dir, plc.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	after, err := d.AuditLog(ctx, a.did)
	if err != nil {
		t.Fatal(err)
	}
	if b, c := mustJSON(t, before), mustJSON(t, after); string(c) != string(b) {
		t.Fatalf("after reopen:\n%s\nbefore:\n%s", c, b)
	}
	// The reopened directory knows the head: the next update chains on.
	c.Advance(time.Second)
	next, err := plc.CreateUpdate(update, a.rotation, plc.Fields{Handle: "kept3.test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Submit(ctx, a.did, next); err != nil {
		t.Fatal(err)
	}
	if err := d.Submit(ctx, a.did, a.genesis); !errors.Is(err, plc.ErrMisordered) {
		t.Fatalf("genesis again after reopen: %v", err)
	}
}

// TestConcurrentSubmit: updates racing on the same head. The writer
// serializes them and each reads the head the one before it left, so
// exactly one wins; the others arrive as attempts to nullify it with a key
// of equal authority, which the directory refuses.
func TestConcurrentSubmit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{NoRateLimit: true})
	ctx := t.Context()
	a := createAccount(t, f.dir, "race.test")
	f.clock.Advance(time.Second)

	const n = 16
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		won      []*didplc.RegularOp
		refusals int
	)
	for i := range n {
		op, err := plc.CreateUpdate(a.genesis, a.rotation, plc.Fields{Handle: syntax.Handle("race" + string(rune('a'+i)) + ".test")})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			err := f.dir.Submit(ctx, a.did, op)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, op)
			case errors.Is(err, plc.ErrInvalidSignature):
				refusals++
			default:
				t.Errorf("submit: %v", err)
			}
		})
	}
	// And genesis operations of other DIDs beside them.
	others := make([]syntax.DID, 8)
	for i := range others {
		did, op, err := plc.CreateGenesis(newKey(t), plc.Fields{Handle: syntax.Handle("other" + string(rune('a'+i)) + ".test")})
		if err != nil {
			t.Fatal(err)
		}
		others[i] = did
		wg.Go(func() {
			if err := f.dir.Submit(ctx, did, op); err != nil {
				t.Errorf("genesis of %s: %v", did, err)
			}
		})
	}
	wg.Wait()

	if len(won) != 1 || refusals != n-1 {
		t.Fatalf("%d accepted, %d refused; want 1 and %d", len(won), refusals, n-1)
	}
	audit, err := f.dir.AuditLog(ctx, a.did)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 2 || audit[1].CID != won[0].CID().String() {
		t.Fatalf("audit log %+v", audit)
	}
	if err := didplc.VerifyOpLog(audit); err != nil {
		t.Fatal(err)
	}
	for _, did := range others {
		if _, err := f.dir.Resolve(ctx, did); err != nil {
			t.Errorf("%s: %v", did, err)
		}
	}
}

func TestSubmitNil(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	var op *didplc.RegularOp // a typed nil is JSON null
	for _, o := range []didplc.Operation{nil, op} {
		if err := f.dir.Submit(t.Context(), "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", o); !errors.Is(err, plc.ErrInvalidOperation) {
			t.Errorf("Submit(%#v) = %v", o, err)
		}
	}
}
