// Package random is the server's one source of randomness. Unseeded it is
// crypto/rand. Seeded, each named stream is a ChaCha8 stream derived from the
// seed and the name, so two servers given one seed draw the same bytes for
// the same sequence of requests: the same keys, DIDs, secrets and tokens.
//
// Streams are named by what they make so that a kind of draw whose count
// can vary (OAuth ids, say) never shifts another (account keys).
package random

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"io"
	mathrand "math/rand/v2"
	"sync"
)

// Source hands out the server's random streams. A nil *Source is crypto/rand.
type Source struct {
	seed uint64

	mu      sync.Mutex
	streams map[string]*stream
}

// Seeded is a Source whose every stream follows from seed.
func Seeded(seed uint64) *Source {
	return &Source{seed: seed, streams: map[string]*stream{}}
}

// Seeded reports whether s follows a seed (false for nil: crypto/rand).
func (s *Source) Seeded() bool { return s != nil }

// Stream is the stream called name: crypto/rand.Reader when s is nil. The
// same name gives the same stream, which goes on where it stopped (a
// restarted server on the same Source draws new bytes, not the old ones
// again). Streams are safe for concurrent use; what a concurrent workload
// draws in which order is up to the scheduler.
func (s *Source) Stream(name string) io.Reader {
	if s == nil {
		return rand.Reader
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.streams[name]; ok {
		return st
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s.seed)
	key := sha256.Sum256(append(b[:], "fakepds/random/"+name...))
	st := &stream{c: mathrand.NewChaCha8(key)}
	s.streams[name] = st
	return st
}

// Read fills b from r, crypto/rand when r is nil; a failed read is a broken
// entropy source, fatal as crypto/rand treats one.
func Read(r io.Reader, b []byte) {
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, b); err != nil {
		panic("random: " + err.Error())
	}
}

type stream struct {
	mu sync.Mutex
	c  *mathrand.ChaCha8
}

func (s *stream) Read(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.Read(b)
}
