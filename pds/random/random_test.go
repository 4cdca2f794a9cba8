package random_test

import (
	"bytes"
	"testing"

	"github.com/fakepds/fakepds/pds/random"
)

func draw(s *random.Source, name string) []byte {
	b := make([]byte, 16)
	random.Read(s.Stream(name), b)
	return b
}

func TestStreams(t *testing.T) {
	a, b := random.Seeded(1), random.Seeded(1)
	first := draw(a, "keys")
	if !bytes.Equal(first, draw(b, "keys")) {
		t.Fatal("one seed, one name: two streams")
	}
	// A stream asked for again goes on (a restarted server draws new
	// bytes), and another name is another stream.
	if bytes.Equal(first, draw(a, "keys")) {
		t.Fatal("the stream started again")
	}
	if bytes.Equal(draw(b, "keys"), draw(b, "tokens")) || bytes.Equal(first, draw(random.Seeded(2), "keys")) {
		t.Fatal("another name or seed drew the same bytes")
	}
	var unseeded *random.Source
	if unseeded.Seeded() || bytes.Equal(draw(unseeded, "keys"), draw(unseeded, "keys")) {
		t.Fatal("a nil Source is not crypto/rand")
	}
}
