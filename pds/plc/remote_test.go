package plc_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"

	"github.com/fakepds/fakepds/pds/plc"
)

// A Remote over a directory's HTTP API answers as the Directory itself:
// the same document, data and last operation, the same errors for an
// unknown and a tombstoned DID, and a refused operation with the
// directory's status, message and kind.
func TestRemoteAnswersAsTheDirectory(t *testing.T) {
	t.Parallel()
	f := newFixture(t, plc.Options{})
	r := plc.NewRemote(f.srv.URL+"/", nil)
	ctx := t.Context()
	a := createAccount(t, f.dir, "remote.test")

	wantDoc, err := f.dir.Resolve(ctx, a.did)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err := r.Resolve(ctx, a.did); err != nil || !reflect.DeepEqual(doc, wantDoc) {
		t.Errorf("Resolve: %+v %v\nwant %+v", doc, err, wantDoc)
	}
	wantData, err := f.dir.Data(ctx, a.did)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := r.Data(ctx, a.did); err != nil || !reflect.DeepEqual(data, wantData) {
		t.Errorf("Data: %+v %v\nwant %+v", data, err, wantData)
	}

	// An update through the Remote lands in the directory.
	f.clock.Advance(time.Second)
	last, err := r.Last(ctx, a.did)
	if err != nil || last.CID() != a.genesis.CID() {
		t.Fatalf("Last: %v %v, want the genesis %s", last, err, a.genesis.CID())
	}
	up, err := plc.CreateUpdate(last, a.rotation, plc.Fields{Handle: "moved.test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(ctx, a.did, up); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if got, err := f.dir.Last(ctx, a.did); err != nil || got.CID() != up.CID() {
		t.Fatalf("the directory's last operation: %v %v, want the update", got, err)
	}

	// Refusals: the same *OpError the directory gives, kind included.
	f.clock.Advance(time.Second)
	forged, err := plc.CreateUpdate(up, newKey(t), plc.Fields{Handle: "forged.test"})
	if err != nil {
		t.Fatal(err)
	}
	unknownPrev, err := plc.CreateUpdate(forged, a.rotation, plc.Fields{Handle: "nowhere.test"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		op   didplc.Operation
		kind error
	}{
		"signed by another key": {forged, plc.ErrInvalidSignature},
		"prev unknown":          {unknownPrev, plc.ErrMisordered},
	} {
		var want, got *plc.OpError
		if err := f.dir.Submit(ctx, a.did, tc.op); !errors.As(err, &want) {
			t.Fatalf("%s: the directory: %v, want an *OpError", name, err)
		}
		if err := r.Submit(ctx, a.did, tc.op); !errors.As(err, &got) {
			t.Fatalf("%s: the remote: %v, want an *OpError", name, err)
		}
		if *got != *want || !errors.Is(got, tc.kind) {
			t.Errorf("%s: remote %+v, directory %+v, want kind %v", name, got, want, tc.kind)
		}
	}

	// Unknown and tombstoned DIDs: ErrNotFound and ErrTombstoned.
	unknown := syntax.DID("did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")
	if _, err := r.Resolve(ctx, unknown); !errors.Is(err, plc.ErrNotFound) {
		t.Errorf("Resolve(unknown): %v, want ErrNotFound", err)
	}
	if _, err := r.Last(ctx, unknown); !errors.Is(err, plc.ErrNotFound) {
		t.Errorf("Last(unknown): %v, want ErrNotFound", err)
	}
	tomb, err := plc.CreateTombstone(up, a.rotation)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(ctx, a.did, tomb); err != nil {
		t.Fatalf("Submit(tombstone): %v", err)
	}
	if _, err := r.Resolve(ctx, a.did); !errors.Is(err, plc.ErrTombstoned) {
		t.Errorf("Resolve(tombstoned): %v, want ErrTombstoned", err)
	}
	if _, err := r.Data(ctx, a.did); !errors.Is(err, plc.ErrTombstoned) {
		t.Errorf("Data(tombstoned): %v, want ErrTombstoned", err)
	}
	if last, err := r.Last(ctx, a.did); err != nil || last.CID() != tomb.CID() {
		t.Errorf("Last(tombstoned): %v %v, want the tombstone", last, err)
	}
}
