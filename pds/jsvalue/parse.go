package jsvalue

import (
	"math"
	"strconv"
	"strings"
	"unicode"
)

// IsSpace reports whether r is StrWhiteSpaceChar, what
// String.prototype.trim, parseInt and the \s of a regular expression skip:
// WhiteSpace (tab, vertical tab, form feed, U+FEFF and every Zs space) and
// LineTerminator (LF, CR, U+2028, U+2029). U+0085 and U+180E are not.
func IsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0xfeff, 0x2028, 0x2029:
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// TrimSpace is String.prototype.trim.
func TrimSpace(s string) string { return strings.TrimFunc(s, IsSpace) }

// ParseInt is parseInt(s, 10): leading white space, an optional sign, then
// the longest run of decimal digits; whatever follows is ignored. false is
// NaN (no digits). Large values round to the nearest float64, as Node's;
// "-0" is -0.
func ParseInt(s string) (float64, bool) {
	s = strings.TrimLeftFunc(s, IsSpace)
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 {
		return math.NaN(), false
	}
	n, _ := strconv.ParseFloat(s[:end], 64) // all digits: only ErrRange, and then ±Inf
	if neg {
		n = -n
	}
	return n, true
}

// IsArrayIndex reports whether JavaScript takes the property key k as an
// array index: a canonical decimal below 2^32-1. Such keys enumerate first,
// ascending, before every other key in insertion order.
func IsArrayIndex(k string) bool {
	if k == "" || len(k) > 10 || k[0] < '0' || k[0] > '9' || k[0] == '0' && len(k) > 1 {
		return false
	}
	n, err := strconv.ParseUint(k, 10, 64)
	return err == nil && n < 1<<32-1
}
