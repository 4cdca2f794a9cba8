package k256_test

import (
	"bytes"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atcrypto"

	"github.com/fakepds/fakepds/pds/k256"
	"github.com/fakepds/fakepds/pds/random"
)

func TestSignaturesAreDeterministicAndVerify(t *testing.T) {
	a, err := k256.Generate(random.Seeded(7).Stream("k"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := k256.Generate(random.Seeded(7).Stream("k"))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Equal(b) || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("one seed made two keys")
	}
	other, _ := k256.Generate(random.Seeded(8).Stream("k"))
	if a.Equal(other) {
		t.Fatal("two seeds made one key")
	}
	msg := []byte("commit bytes")
	s1, err := a.HashAndSign(msg)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := b.HashAndSign(msg)
	if !bytes.Equal(s1, s2) {
		t.Fatalf("one key signed one message two ways:\n%x\n%x", s1, s2)
	}
	pub, err := a.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	// HashAndVerify is the strict check: it refuses a high S.
	if err := pub.HashAndVerify(msg, s1); err != nil {
		t.Fatalf("indigo refuses the signature: %v", err)
	}
	indigoKey, _ := atcrypto.ParsePrivateBytesK256(a.Bytes())
	if !a.Equal(indigoKey) {
		t.Fatal("not Equal to indigo's key of the same bytes")
	}
}
