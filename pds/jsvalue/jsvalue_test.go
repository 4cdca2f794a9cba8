package jsvalue

import (
	"math"
	"strings"
	"testing"
)

// The expected values below are what Node 22 prints for the same inputs
// (the reference's runtime); see each function's ECMAScript definition.

func TestNumber(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1, "-1"}, {0.1, "0.1"},
		{1e21, "1e+21"}, {1e-7, "1e-7"}, {123e-20, "1.23e-18"}, {0.000001, "0.000001"},
		{1.5e-7, "1.5e-7"}, {1 << 53, "9007199254740992"}, {1<<53 + 2, "9007199254740994"},
		{1e300, "1e+300"}, {-1e-300, "-1e-300"}, {5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"}, {math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"}, {100, "100"},
		{123456789012345680000, "123456789012345680000"}, {0.30000000000000004, "0.30000000000000004"},
	} {
		if got := Number(c.f); got != c.want {
			t.Errorf("Number(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}

func TestParseInt(t *testing.T) {
	for _, c := range []struct {
		s    string
		want string // String(parseInt(s, 10))
	}{
		{"42", "42"}, {" \u1680 42abc", "42"}, {"\u180e1", "NaN"}, {"-0x1", "0"}, {"", "NaN"},
		{"+-1", "NaN"}, {"\ufeff\u2028\u3000-7e3", "-7"}, {"0012", "12"},
		{"99999999999999999999999", "1e+23"}, {"\u00851", "NaN"}, {"\u200b1", "NaN"},
		{"+5", "5"}, {".5", "NaN"}, {"\t\n\v\f\r 8", "8"},
	} {
		n, ok := ParseInt(c.s)
		if got := Number(n); got != c.want || ok != (c.want != "NaN") {
			t.Errorf("ParseInt(%q) = %v, %v; want %s", c.s, got, ok, c.want)
		}
	}
	if n, _ := ParseInt("-0"); !math.Signbit(n) {
		t.Errorf("ParseInt(-0) = %v, want -0", n)
	}
}

func TestQuote(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{`a"b\c`, `"a\"b\\c"`},
		{"\u0007\b\f\n\r\t", `"\u0007\b\f\n\r\t"`},
		{"<>&\u2028\u2029", "\"<>&\u2028\u2029\""},
		{"é😀", `"é😀"`},
		{"\u007f", "\"\u007f\""},
		{"a\xffb", "\"a\ufffdb\""},
	} {
		if got := Quote(c.s); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.s, got, c.want)
		}
	}
	if got, want := QuoteUnits([]uint16{'a', 0xd83d, 0xde00, 0xd83d}), "\"a😀\\ud83d\""; got != want {
		t.Errorf("QuoteUnits = %s, want %s", got, want)
	}
}

func TestLength(t *testing.T) {
	for s, want := range map[string]int{"😀": 2, "é": 1, "abc": 3, "\U0010ffffx": 3, "": 0} {
		if got := Length(s); got != want {
			t.Errorf("Length(%q) = %d, want %d", s, got, want)
		}
	}
}

type stringer struct{}

func (stringer) String() string { return "bafy" }

func TestString(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{[]any{int64(1), nil, []any{int64(2), int64(3)}, Undefined{}, true}, "1,,2,3,,true"},
		{keys{"a"}, "[object Object]"},
		{[]byte{1, 2}, "1,2"},
		{1e21, "1e+21"},
		{nil, "null"},
		{stringer{}, "bafy"},
	} {
		if got := String(c.v); got != c.want {
			t.Errorf("String(%#v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestSortKeys(t *testing.T) {
	ks := []string{"b", "2", "a", "1", "01", "4294967295", "4294967294"}
	SortKeys(ks)
	if got, want := strings.Join(ks, " "), "1 2 4294967294 b a 01 4294967295"; got != want {
		t.Errorf("SortKeys = %s, want %s", got, want)
	}
}

func TestPreview(t *testing.T) {
	a := strings.Repeat("a", 255)
	for _, c := range []struct{ json, want string }{
		{`"` + a[:254] + `😀"`, `"` + a[:254] + `\ud83d…"`},
		{`"` + a + `"`, `"` + a + `"`},
		{`"` + a + `a"`, `"` + a + `…"`},
		{`[1,"x",{"a":1}]`, `[1, "x", ...]`},
		{`{"b":1,"2":[],"c":null}`, `{"2": ..., "b": ..., ...}`},
		{`{}`, `{}`},
		{`[[1,2,3]]`, `[[1, 2, ...]]`},
		{`1e400`, `Infinity`},
		{`null`, `null`},
		{`{"a":1,"a":2}`, `{"a": ...}`},
		{`{bad`, `{bad`},
	} {
		if got := PreviewJSON([]byte(c.json)); got != c.want {
			t.Errorf("PreviewJSON(%.40s) = %s, want %s", c.json, got, c.want)
		}
	}
	name := func(v any) string {
		if _, ok := v.(stringer); ok {
			return "cid"
		}
		return ""
	}
	if got := PreviewWith([]any{stringer{}, []byte{1}}, name); got != "[cid, object]" {
		t.Errorf("PreviewWith = %s", got)
	}
	if got := Preview(Undefined{}); got != "undefined" {
		t.Errorf("Preview(undefined) = %s", got)
	}
}

func TestMarshal(t *testing.T) {
	got, err := Marshal(map[string]any{"text": "a <b> & c", "n": 1})
	if want := `{"n":1,"text":"a <b> & c"}`; err != nil || string(got) != want {
		t.Fatalf("Marshal = %s, %v; want %s", got, err, want)
	}
}
