package lexval

import (
	"regexp"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// checkSyntax compares the regexp-free checks with indigo's parsers on s.
func checkSyntax(t *testing.T, s string) {
	t.Helper()
	_, err := syntax.ParseNSID(s)
	if got := ValidNSID(s); got != (err == nil) {
		t.Errorf("ValidNSID(%q) = %v, syntax says %v", s, got, err)
	}
	_, err = syntax.ParseHandle(s)
	if got := validHandle(s); got != (err == nil) {
		t.Errorf("validHandle(%q) = %v, syntax says %v", s, got, err)
	}
	_, err = syntax.ParseDID(s)
	if got := validDID(s); got != (err == nil) {
		t.Errorf("validDID(%q) = %v, syntax says %v", s, got, err)
	}
	_, err = syntax.ParseRecordKey(s)
	if got := ValidRecordKey(s); got != (err == nil) {
		t.Errorf("ValidRecordKey(%q) = %v, syntax says %v", s, got, err)
	}
}

// TestSyntaxExhaustive: every string up to a length over alphabets that
// hold each class the regexps tell apart, then the length limits.
func TestSyntaxExhaustive(t *testing.T) {
	t.Parallel()
	each := func(prefix, alphabet string, n int) {
		var rec func(s string, n int)
		rec = func(s string, n int) {
			checkSyntax(t, s)
			if n == 0 || t.Failed() {
				return
			}
			for i := 0; i < len(alphabet); i++ {
				rec(s+alphabet[i:i+1], n-1)
			}
		}
		rec(prefix, n)
	}
	long := 6
	if testing.Short() || raceEnabled {
		long = 4
	}
	each("", "aZ0-.", long+1)    // NSIDs and handles
	each("", "ai:d%_\xff", long) // DIDs, record keys and bytes none take
	each("did:", "a:%_.-Z0~", long-1)
	each("a.b", "aZ0-.", long-1)

	// Parts at their length limits, in each place.
	parts := []string{"", "a", "ab", "a-b", "-a", "a-", "0a", "a0", "A"}
	for _, n := range []int{61, 62, 63, 64} {
		parts = append(parts, strings.Repeat("a", n), "a"+strings.Repeat("-", n-2)+"b", "0"+strings.Repeat("a", n-1))
	}
	for _, a := range parts {
		for _, b := range parts {
			for _, c := range parts {
				checkSyntax(t, a+"."+b)
				checkSyntax(t, a+"."+b+"."+c)
				checkSyntax(t, "did:"+a+":"+b)
			}
		}
	}
	// Whole lengths at their limits.
	base := strings.Repeat(strings.Repeat("a", 63)+".", 6)
	for n := 240; n <= 330; n++ {
		checkSyntax(t, base[:n])
		checkSyntax(t, base[:n-1]+"b")
		checkSyntax(t, strings.Repeat("a", n))
	}
	for _, n := range []int{2040, 2047, 2048, 2049, 2050} {
		checkSyntax(t, "did:web:"+strings.Repeat("a", n-8))
	}
	for _, n := range []int{511, 512, 513} {
		checkSyntax(t, strings.Repeat("a", n))
	}
}

func FuzzSyntax(f *testing.F) {
	for _, s := range []string{"app.bsky.feed.post", "com.example.fooBar", "a.b.c", "a-.b.c", "a.b.c0", "alice.test", "did:plc:abcdefghijklmnopqrstuvwx", "did:web:example.com%3A8080", "did:a:b:", "self", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkSyntax(t, s) })
}

// TestIntParam holds intParam to the regexp it replaced.
func TestIntParam(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^-?[0-9]+$`)
	var rec func(s string, n int)
	rec = func(s string, n int) {
		if got, want := intParam(s), re.MatchString(s); got != want {
			t.Errorf("intParam(%q) = %v, the regexp says %v", s, got, want)
		}
		if n > 0 {
			for _, c := range []string{"-", "0", "9", "a", "+", " ", "\n", "\xff", "٣"} {
				rec(s+c, n-1)
			}
		}
	}
	rec("", 5)
}

func BenchmarkSyntax(b *testing.B) {
	const nsid, handle = "app.bsky.feed.post", "alice.example.test"
	b.Run("NSID", func(b *testing.B) {
		for b.Loop() {
			ValidNSID(nsid)
		}
	})
	b.Run("NSID/regexp", func(b *testing.B) {
		for b.Loop() {
			_, _ = syntax.ParseNSID(nsid)
		}
	})
	b.Run("Handle", func(b *testing.B) {
		for b.Loop() {
			validHandle(handle)
		}
	})
	b.Run("Handle/regexp", func(b *testing.B) {
		for b.Loop() {
			_, _ = syntax.ParseHandle(handle)
		}
	})
}

// TestRecordCID: RecordCID is the prefix's Sum, in two allocations (the
// CID's bytes, which escape into cid.Cast, and its string).
func TestRecordCID(t *testing.T) {
	prefix := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256)
	for n := range 300 {
		data := []byte(strings.Repeat("\xa1", n))
		want, err := prefix.Sum(data)
		if err != nil {
			t.Fatal(err)
		}
		if got := RecordCID(data); !got.Equals(want) || got.KeyString() != want.KeyString() {
			t.Fatalf("RecordCID of %d bytes = %s, want %s", n, got, want)
		}
	}
	old := testing.AllocsPerRun(100, func() { _, _ = prefix.Sum([]byte("x")) })
	if n := testing.AllocsPerRun(100, func() { RecordCID([]byte("x")) }); n > 2 {
		t.Errorf("RecordCID: %v allocations, want 2 (the prefix's Sum: %v)", n, old)
	}
}
