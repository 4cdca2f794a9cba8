package lexval

import (
	"net/url"
	"regexp"
	"testing"
	"unicode/utf8"
)

// The regexps validATURI ran before splitATURI, atURIChar and jsonPtrChar.
var (
	oldATURIChars = regexp.MustCompile(`[^a-zA-Z0-9._~:@!$&'()*+,;=%/\\\[\]#?-]`)
	oldATURIRE    = regexp.MustCompile(`^at://([^/?#\s]+)(?:/([^/?#\s]+)(?:/([^/?#\s]+))?)?(/)?(\?[^#\s]*)?(#[^\s]*)?$`)
	oldJSONPtrRE  = regexp.MustCompile(`^/[a-zA-Z0-9._~:@!$&')(*+,;=%\[\]/-]*$`)
)

// oldValidATURI is validATURI as it was, with the regexps.
func oldValidATURI(s string) bool {
	if len(s) > 8192 || oldATURIChars.MatchString(s) {
		return false
	}
	m := oldATURIRE.FindStringSubmatchIndex(s)
	if m == nil {
		return false
	}
	group := func(i int) (string, bool) {
		if m[2*i] < 0 {
			return "", false
		}
		return s[m[2*i]:m[2*i+1]], true
	}
	authority, _ := group(1)
	if !fmtATIdentifier.valid(authority) {
		return false
	}
	if c, ok := group(2); ok && !ValidNSID(c) {
		return false
	}
	if h, ok := group(6); ok {
		h = h[1:]
		if !oldJSONPtrRE.MatchString(h) {
			return false
		}
		if u, err := url.PathUnescape(h); err != nil || !utf8.ValidString(u) {
			return false
		}
	}
	if _, ok := group(4); ok {
		return false
	}
	if _, ok := group(5); ok {
		return false
	}
	if rk, ok := group(3); ok && !validRecordKey(rk) {
		return false
	}
	return true
}

func checkATURI(t *testing.T, s string) {
	t.Helper()
	p, ok := splitATURI(s)
	m := oldATURIRE.FindStringSubmatchIndex(s)
	if ok != (m != nil) {
		t.Fatalf("splitATURI(%q) ok %v, the regexp says %v", s, ok, m != nil)
	}
	if ok {
		got := []any{p.authority, true, p.collection, p.hasCollection, p.rkey, p.hasRKey, map[bool]string{true: "/"}[p.slash], p.slash, p.query, p.hasQuery, p.fragment, p.hasFragment}
		for i := 1; i <= 6; i++ {
			part, has := "", m[2*i] >= 0
			if has {
				part = s[m[2*i]:m[2*i+1]]
			}
			if got[2*(i-1)] != part || got[2*(i-1)+1] != has {
				t.Fatalf("splitATURI(%q) part %d = %q, %v; the regexp's group is %q, %v", s, i, got[2*(i-1)], got[2*(i-1)+1], part, has)
			}
		}
	}
	if got, want := validATURI(s), oldValidATURI(s); got != want {
		t.Fatalf("validATURI(%q) = %v, with the regexps %v", s, got, want)
	}
}

// TestATURIParts: splitATURI's parts are the regexp's groups, and
// validATURI answers as with the regexps, for every string to a length
// over an alphabet of each class the pattern tells apart, after "at://"
// and around valid AT URIs.
func TestATURIParts(t *testing.T) {
	t.Parallel()
	for c := range 256 {
		s := string([]byte{byte(c)})
		if atURIChar(byte(c)) == oldATURIChars.MatchString(s) {
			t.Errorf("atURIChar(%q) = %v", s, atURIChar(byte(c)))
		}
		if jsonPtrChar(byte(c)) != oldJSONPtrRE.MatchString("/"+s) {
			t.Errorf("jsonPtrChar(%q) = %v", s, jsonPtrChar(byte(c)))
		}
	}
	n := 6
	if testing.Short() || raceEnabled {
		n = 4
	}
	const alphabet = "a/?# .\t%"
	var rec func(prefix string, n int)
	rec = func(prefix string, n int) {
		checkATURI(t, prefix)
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			rec(prefix+alphabet[i:i+1], n-1)
		}
	}
	rec("at://", n)
	rec("at:/", 2)
	for _, base := range []string{
		"at://did:plc:abcdefghijklmnopqrstuvwx", "at://alice.test/app.bsky.feed.post", "at://did:web:x.test/app.bsky.feed.post/3l4b6g6qbvs2a",
	} {
		rec(base, 3)
		for _, tail := range []string{"#/a/b", "#/%41", "#/%ff", "#/%zz", "#", "#a", "?q", "?q#/x", "/", "/#/x", "#/a b", "#/\\", "é"} {
			checkATURI(t, base+tail)
		}
	}
}

func FuzzATURI(f *testing.F) {
	for _, s := range []string{"at://did:plc:abcdefghijklmnopqrstuvwx/app.bsky.feed.post/3l4b6g6qbvs2a", "at://a/b/c/#/x", "at://a?x#y", "at://a//b"} {
		f.Add(s)
	}
	f.Fuzz(checkATURI)
}

func BenchmarkATURI(b *testing.B) {
	const s = "at://did:plc:abcdefghijklmnopqrstuvwx/app.bsky.feed.post/3l4b6g6qbvs2a"
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			validATURI(s)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			oldValidATURI(s)
		}
	})
}
