package jsvalue

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Number is Number::toString(f) (radix 10): the shortest digits that
// round-trip, in plain notation for 1e-6 <= |f| < 1e21 and in exponent
// notation ("1e+21", "1.5e-7") beyond; -0 prints as "0".
func Number(f float64) string {
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
	return mant + "e" + exp[:1] + strings.TrimLeft(exp[1:], "0")
}

// Quote is JSON.stringify(s) (QuoteJSONString): '"', '\\' and control
// characters escaped, everything else, '<', '>', '&' and U+2028 included,
// as it is. Invalid UTF-8 prints as U+FFFD, as it would have been decoded.
func Quote(s string) string {
	return string(AppendQuote(make([]byte, 0, len(s)+2), s))
}

// AppendQuote appends Quote(s) to b.
func AppendQuote(b []byte, s string) []byte { return appendQuote(b, s, false) }

// AppendGoQuote appends s quoted as encoding/json writes it with HTML
// escaping off: as AppendQuote, but U+2028 and U+2029 escaped and invalid
// UTF-8 as the escape \ufffd. For answers written by hand that must keep
// the bytes encoding/json made of them.
func AppendGoQuote(b []byte, s string) []byte { return appendQuote(b, s, true) }

// appendQuote is AppendQuote, or AppendGoQuote with goStyle.
func appendQuote(b []byte, s string, goStyle bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				b = append(b, s[start:i]...)
				if goStyle {
					b = append(b, `\ufffd`...)
				} else {
					b = append(b, "\ufffd"...)
				}
				start = i + 1
			case goStyle && (r == '\u2028' || r == '\u2029'):
				b = append(b, s[start:i]...)
				b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
				start = i + size
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
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
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// QuoteUnits is JSON.stringify of a string given as UTF-16 code units,
// which may hold a lone surrogate (a string cut through a pair): that one
// is escaped as \udxxx, as well-formed JSON.stringify does.
func QuoteUnits(u []uint16) string {
	b := []byte{'"'}
	for i := 0; i < len(u); i++ {
		r := rune(u[i])
		if utf16.IsSurrogate(r) {
			if r < 0xdc00 && i+1 < len(u) && u[i+1] >= 0xdc00 && u[i+1] <= 0xdfff {
				r = utf16.DecodeRune(r, rune(u[i+1]))
				i++
			} else {
				b = append(b, `\u`...)
				b = strconv.AppendInt(b, int64(r), 16)
				continue
			}
		}
		q := AppendQuote(nil, string(r))
		b = append(b, q[1:len(q)-1]...)
	}
	return string(append(b, '"'))
}

// Length is String.prototype.length: s's length in UTF-16 code units.
func Length(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n += utf16.RuneLen(r) // 1 for U+FFFD of invalid bytes
	}
	return n
}

// Undefined stands for JavaScript's undefined: a property that is not
// there.
type Undefined struct{}

// Object is a JavaScript object whose keys are known in enumeration order
// (see [SortKeys]).
type Object interface {
	Keys() []string
}

// String is String(v) (ToString) for the values a JSON document or a
// record holds: nil (null), [Undefined], bool, int64, int, float64,
// string, []any (Array.prototype.join: null and undefined items are
// empty), []byte (a Uint8Array: its bytes joined by commas), a
// fmt.Stringer (its toString, as a CID object has) and anything else an
// object, "[object Object]".
func String(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case Undefined:
		return "undefined"
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case float64:
		return Number(v)
	case string:
		return v
	case []byte:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = strconv.Itoa(int(x))
		}
		return strings.Join(parts, ",")
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			switch x.(type) {
			case nil, Undefined:
			default:
				parts[i] = String(x)
			}
		}
		return strings.Join(parts, ",")
	case interface{ String() string }:
		return v.String()
	}
	return "[object Object]"
}

// Marshal is json.Marshal as JSON.stringify writes strings: "<", ">" and
// "&" as they are, not escaped for HTML.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
