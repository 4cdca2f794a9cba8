package plc

import (
	"testing"

	"github.com/fakepds/fakepds/pds/k256"
	"github.com/fakepds/fakepds/pds/random"
)

// TestParsePublicKey: a key parsed once is the same key the next time (no
// second parse), and one that does not parse fails each time and is not
// kept.
func TestParsePublicKey(t *testing.T) {
	priv, err := k256.Generate(random.Seeded(7).Stream("keys"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := priv.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	a, err := parsePublicKey(pub.DIDKey())
	if err != nil {
		t.Fatal(err)
	}
	b, err := parsePublicKey(pub.DIDKey())
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.DIDKey() != pub.DIDKey() {
		t.Fatalf("second parse %p, first %p; did:key %s, want %s", b, a, a.DIDKey(), pub.DIDKey())
	}
	for range 2 {
		if _, err := parsePublicKey("did:key:zfoo"); err == nil {
			t.Fatal("did:key:zfoo parsed")
		}
	}
	publicKeys.Lock()
	_, kept := publicKeys.m["did:key:zfoo"]
	publicKeys.Unlock()
	if kept {
		t.Fatal("a key that does not parse was kept")
	}
}
