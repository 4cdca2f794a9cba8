package pds

import (
	"fmt"
	"testing"

	"github.com/fakepds/fakepds/pds/k256"
)

func testSigningKey(t *testing.T) *k256.PrivateKey {
	t.Helper()
	b := make([]byte, 32)
	b[31] = 1
	k, err := k256.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The signing key cache holds at most maxCachedKeys keys however many
// accounts sign, and still answers for the newest and forgets a deleted
// account's.
func TestKeyCacheBoundsItsSize(t *testing.T) {
	var c keyCache
	k := testSigningKey(t)
	var did string
	for i := range 3*maxCachedKeys + 7 {
		did = fmt.Sprintf("did:plc:%024d", i)
		c.put(did, k)
		if n := c.len(); n > maxCachedKeys {
			t.Fatalf("after %d accounts the cache holds %d keys, want at most %d", i+1, n, maxCachedKeys)
		}
	}
	if got, ok := c.get(did); !ok || got != k {
		t.Fatal("the newest account's key is not cached")
	}
	c.forget(did)
	if _, ok := c.get(did); ok {
		t.Fatal("a forgotten account's key is still cached")
	}
}
