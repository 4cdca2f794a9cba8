package plc_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/did-method-plc/go-didplc"
	"github.com/fakepds/fakepds/pds/plc"
)

func TestCreateGenesisDefaults(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	did, op, err := plc.CreateGenesis(k, plc.Fields{})
	if err != nil {
		t.Fatal(err)
	}
	// The signer's key alone rotates; nothing else is published.
	if !slices.Equal(op.RotationKeys, []string{didKey(t, k)}) || len(op.AlsoKnownAs) != 0 ||
		len(op.VerificationMethods) != 0 || len(op.Services) != 0 || op.Type != "plc_operation" || op.Prev != nil {
		t.Fatalf("genesis %+v", op)
	}
	le := didplc.LogEntry{DID: string(did), Operation: didplc.OpEnum{Regular: op}, CID: op.CID().String(), CreatedAt: "2025-01-01T00:00:00.000Z"}
	if err := le.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestCreateUpdate(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	other := didKey(t, newKey(t))
	base := &didplc.RegularOp{
		Type:                "plc_operation",
		RotationKeys:        []string{didKey(t, k)},
		VerificationMethods: map[string]string{"atproto": "did:key:zOld", "label": "did:key:zLabel"},
		AlsoKnownAs:         []string{"https://example.test", "at://old.test", "at://second.test"},
		Services:            map[string]didplc.OpService{"atproto_pds": {Type: "AtprotoPersonalDataServer", Endpoint: "https://old.test"}},
	}
	if err := base.Sign(k); err != nil {
		t.Fatal(err)
	}
	noHandle := *base
	noHandle.AlsoKnownAs = []string{"https://example.test"}
	if err := noHandle.Sign(k); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		last  *didplc.RegularOp
		f     plc.Fields
		check func(t *testing.T, op *didplc.RegularOp)
	}{
		{"nothing changes", base, plc.Fields{}, func(t *testing.T, op *didplc.RegularOp) {
			if !slices.Equal(op.AlsoKnownAs, base.AlsoKnownAs) || !slices.Equal(op.RotationKeys, base.RotationKeys) ||
				!maps.Equal(op.VerificationMethods, base.VerificationMethods) || !maps.Equal(op.Services, base.Services) {
				t.Errorf("changed: %+v", op)
			}
		}},
		{"handle replaces the first at:// entry", base, plc.Fields{Handle: "new.test"}, func(t *testing.T, op *didplc.RegularOp) {
			if want := []string{"https://example.test", "at://new.test", "at://second.test"}; !slices.Equal(op.AlsoKnownAs, want) {
				t.Errorf("alsoKnownAs %v, want %v", op.AlsoKnownAs, want)
			}
		}},
		{"handle goes first when there is none", &noHandle, plc.Fields{Handle: "new.test"}, func(t *testing.T, op *didplc.RegularOp) {
			if want := []string{"at://new.test", "https://example.test"}; !slices.Equal(op.AlsoKnownAs, want) {
				t.Errorf("alsoKnownAs %v, want %v", op.AlsoKnownAs, want)
			}
		}},
		{"PDS without a scheme", base, plc.Fields{PDS: "pds.test"}, func(t *testing.T, op *didplc.RegularOp) {
			if got := op.Services["atproto_pds"]; got != (didplc.OpService{Type: "AtprotoPersonalDataServer", Endpoint: "https://pds.test"}) {
				t.Errorf("service %+v", got)
			}
		}},
		{"PDS over http", base, plc.Fields{PDS: "http://localhost:2583"}, func(t *testing.T, op *didplc.RegularOp) {
			if got := op.Services["atproto_pds"].Endpoint; got != "http://localhost:2583" {
				t.Errorf("endpoint %s", got)
			}
		}},
		{"signing key, others kept", base, plc.Fields{SigningKey: "did:key:zNew"}, func(t *testing.T, op *didplc.RegularOp) {
			if want := map[string]string{"atproto": "did:key:zNew", "label": "did:key:zLabel"}; !maps.Equal(op.VerificationMethods, want) {
				t.Errorf("verificationMethods %v", op.VerificationMethods)
			}
		}},
		{"rotation keys", base, plc.Fields{RotationKeys: []string{other}}, func(t *testing.T, op *didplc.RegularOp) {
			if !slices.Equal(op.RotationKeys, []string{other}) {
				t.Errorf("rotationKeys %v", op.RotationKeys)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op, err := plc.CreateUpdate(tc.last, k, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if op.PrevCIDStr() != tc.last.CID().String() || op.Type != "plc_operation" {
				t.Fatalf("prev %s, type %q", op.PrevCIDStr(), op.Type)
			}
			if _, err := didplc.VerifySignatureAny(op, tc.last.RotationKeys); err != nil {
				t.Fatalf("signature: %v", err)
			}
			tc.check(t, op)
		})
	}

	// The update owns its slices and maps.
	op, err := plc.CreateUpdate(base, k, plc.Fields{})
	if err != nil {
		t.Fatal(err)
	}
	op.AlsoKnownAs[0], op.RotationKeys[0], op.VerificationMethods["atproto"] = "x", "x", "x"
	op.Services["atproto_pds"] = didplc.OpService{}
	if base.AlsoKnownAs[0] == "x" || base.RotationKeys[0] == "x" || base.VerificationMethods["atproto"] == "x" || base.Services["atproto_pds"].Type == "" {
		t.Fatal("the update aliases the last operation")
	}

	tomb, err := plc.CreateTombstone(base, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plc.CreateUpdate(tomb, k, plc.Fields{}); err == nil {
		t.Fatal("update after a tombstone")
	}
}
