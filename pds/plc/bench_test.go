package plc_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
	"github.com/fakepds/fakepds/pds/plc"
)

// BenchmarkSubmitGenesis is a PDS's createAccount share of the directory:
// verify a genesis operation, derive its DID, append it. The operations are
// signed before the timer starts.
func BenchmarkSubmitGenesis(b *testing.B) {
	f := newFixture(b, plc.Options{})
	key := newKey(b)
	signing := didKey(b, newKey(b))
	type genesis struct {
		did syntax.DID
		op  *didplc.RegularOp
	}
	ops := make([]genesis, b.N)
	for i := range ops {
		did, op, err := plc.CreateGenesis(key, plc.Fields{
			SigningKey: signing, Handle: syntax.Handle(fmt.Sprintf("u%d.test", i)), PDS: testPDS,
		})
		if err != nil {
			b.Fatal(err)
		}
		ops[i] = genesis{did, op}
	}
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := f.dir.Submit(ctx, ops[i].did, ops[i].op); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolve resolves a DID with a genesis and an update: through
// the Go API, and as code under test does, over HTTP with indigo.
func BenchmarkResolve(b *testing.B) {
	f := newFixture(b, plc.Options{})
	a := createAccount(b, f.dir, "bench.test")
	f.clock.Advance(time.Second)
	update, err := plc.CreateUpdate(a.genesis, a.rotation, plc.Fields{Handle: "bench2.test"})
	if err != nil {
		b.Fatal(err)
	}
	if err := f.dir.Submit(b.Context(), a.did, update); err != nil {
		b.Fatal(err)
	}

	b.Run("direct", func(b *testing.B) {
		ctx := b.Context()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.dir.Resolve(ctx, a.did); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		ctx := b.Context()
		resolver := identity.BaseDirectory{PLCURL: f.srv.URL}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := resolver.ResolveDID(ctx, a.did); err != nil {
				b.Fatal(err)
			}
		}
	})
}
