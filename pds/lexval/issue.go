package lexval

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
)

// This file writes validation messages the way @atproto/lex-schema does
// (core/validation-issue.js): "<what is wrong> at <JSON path>", values
// quoted through a short JavaScript-flavoured preview.

// seg is one step of a path: an object key, or an array index when key is
// empty and idx >= 0.
type seg struct {
	key string
	idx int
}

// issue is one validation failure, its message still in parts so that
// nothing is formatted unless a write fails.
type issue struct {
	path []seg
	msg  string
}

func (is *issue) String() string { return is.msg + " at " + jsonPath(is.path) }

var identSeg = regexp.MustCompile(`^[a-zA-Z_$][a-zA-Z0-9_]*$`)

func jsonPath(path []seg) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, s := range path {
		switch {
		case s.key == "" && s.idx >= 0:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.idx))
			b.WriteByte(']')
		case identSeg.MatchString(s.key):
			b.WriteByte('.')
			b.WriteString(s.key)
		default:
			b.WriteByte('[')
			b.WriteString(jsString(s.key))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func msgInvalidType(v any, expected ...string) string {
	return "Expected " + oneOf(expected) + " value type (got " + preview(v) + ")"
}

func msgInvalidValue(v any, values ...any) string {
	s := make([]string, len(values))
	for i, x := range values {
		s[i] = preview(x)
	}
	return "Expected " + oneOf(s) + " (got " + preview(v) + ")"
}

func msgTooBig(what string, max, got int64) string {
	return what + " too big (maximum " + strconv.FormatInt(max, 10) + ", got " + strconv.FormatInt(got, 10) + ")"
}

func msgTooSmall(what string, min, got int64) string {
	return what + " too small (minimum " + strconv.FormatInt(min, 10) + ", got " + strconv.FormatInt(got, 10) + ")"
}

func msgInvalidFormat(s string, f format) string {
	return "Invalid " + f.description() + " (got " + preview(s) + ")"
}

func oneOf(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return "one of " + strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// previewMax is where the reference cuts strings it quotes, in UTF-16
// code units, an ellipsis included.
const previewMax = 256

// preview describes a value in a message as lex-schema's stringifyValue
// does: strings quoted (long ones cut), objects and arrays by their first
// two entries.
func preview(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return jsNumber(v)
	case string:
		if utf16Len(v) < previewMax {
			return jsString(v)
		}
		return jsStringUnits(append(utf16.Encode([]rune(v))[:previewMax-1], '…'))
	case []any:
		return "[" + previewList(len(v), func(i int) string { return preview(v[i]) }) + "]"
	case *object:
		return "{" + previewList(len(v.fields), func(i int) string { return jsString(v.fields[i].key) + ": ..." }) + "}"
	case cid.Cid:
		return "cid"
	case undefined:
		return "undefined"
	}
	return "object" // bytes
}

// undefined stands for JavaScript's undefined in a message: a property
// that is not there.
type undefined struct{}

func previewList(n int, item func(int) string) string {
	var b strings.Builder
	for i := 0; i < n && i < 2; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(item(i))
	}
	if n > 2 {
		b.WriteString(", ...")
	}
	return b.String()
}

// jsString is JSON.stringify(s).
func jsString(s string) string {
	return string(appendJSString(make([]byte, 0, len(s)+2), s))
}

// appendJSString appends s as JSON.stringify writes it: only '"', '\\'
// and control characters escaped, everything else (including '<', '>',
// '&', U+2028) as is.
func appendJSString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// jsStringUnits is JSON.stringify of a string given as UTF-16 code units,
// which may hold a lone surrogate (a cut through a pair): that one is
// escaped as \udxxx.
func jsStringUnits(u []uint16) string {
	var b []byte
	b = append(b, '"')
	for i := 0; i < len(u); i++ {
		r := rune(u[i])
		if utf16.IsSurrogate(r) {
			if r < 0xdc00 && i+1 < len(u) && u[i+1] >= 0xdc00 && u[i+1] <= 0xdfff {
				r = utf16.DecodeRune(r, rune(u[i+1]))
				i++
			} else {
				b = append(b, `\u`...)
				b = append(b, strconv.FormatInt(int64(r), 16)...)
				continue
			}
		}
		s := appendJSString(nil, string(r))
		b = append(b, s[1:len(s)-1]...)
	}
	return string(append(b, '"'))
}

// utf16Len is JavaScript's String.prototype.length.
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// jsNumber is JavaScript's String(f).
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // 1e+21, 1.5e-07
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[0]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + string(sign) + exp
}

// jsToString is `${v}` for the values a record may hold, which the
// reference prints in its $type mismatch message.
func jsToString(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return v
	case bool, int64, float64:
		return preview(v)
	case cid.Cid:
		return v.String()
	case []byte:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = strconv.Itoa(int(x))
		}
		return strings.Join(parts, ",")
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			if x != nil {
				parts[i] = jsToString(x)
			}
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}
