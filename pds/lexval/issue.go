package lexval

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/jsvalue"
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
			b.WriteString(jsvalue.Quote(s.key))
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

// preview describes a value in a message as lex-schema's stringifyValue
// does; CIDs are "cid" there, bytes (a Uint8Array) "object".
func preview(v any) string { return jsvalue.PreviewWith(v, previewName) }

func previewName(v any) string {
	if _, ok := v.(cid.Cid); ok {
		return "cid"
	}
	return ""
}

// Keys makes an object a jsvalue.Object for previews; its fields are in
// JavaScript order already.
func (o *object) Keys() []string {
	ks := make([]string, len(o.fields))
	for i, f := range o.fields {
		ks[i] = f.key
	}
	return ks
}
