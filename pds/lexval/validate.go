package lexval

import (
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/rivo/uniseg"

	"github.com/fakepds/fakepds/pds/jsvalue"
)

// A node is one compiled lexicon type, shaped like the @atproto/lex-schema
// validator that @atproto/lex-builder generates for it: a named object def
// is a typed object, a union is a typed union of its refs, a string with
// "enum" or "const" is an enum or literal, "default" plays no part (the
// reference validates records in "validate" mode, which ignores defaults).
type node struct {
	kind kind
	name string // $type of a record or named object; token value

	length    bounds // string (UTF-8 bytes), bytes, array
	graphemes bounds // string
	value     bounds // integer
	format    format // string

	values []any   // literal (one) or enum values: string, int64 or bool
	items  *node   // array
	props  []prop  // object, record
	key    *node   // record: its record key type
	refs   []*node // union members, in lexicon order
	closed bool    // union

	accept  []string // blob
	maxSize bounds   // blob (only max)
}

// bounds is an optional minimum and maximum.
type bounds struct {
	min, max       int64
	hasMin, hasMax bool
}

// check returns the "too small" or "too big" message for n, or "".
func (b bounds) check(what string, n int64) string {
	if b.hasMin && n < b.min {
		return msgTooSmall(what, b.min, n)
	}
	if b.hasMax && n > b.max {
		return msgTooBig(what, b.max, n)
	}
	return ""
}

type kind uint8

const (
	kString kind = iota
	kInteger
	kBoolean
	kBytes
	kCID
	kBlob
	kUnknown // lexicon "unknown": any object (lex-schema's lexMap)
	kArray
	kObject
	kRecord
	kUnion
	kToken
	kLiteral
	kEnum
	kNever
)

type prop struct {
	name     string
	node     *node
	optional bool
	nullable bool
	// hasDefault: the lexicon gives a default, which lex-schema's parse
	// mode (inputs and params, not records) takes for a missing value.
	hasDefault bool
}

// validator walks a value beside its schema, keeping the path for messages.
type validator struct {
	path []seg
	// input: a procedure's input rather than a record, checked as
	// lex-schema parses (not validates) it: a missing value with a default
	// takes it, and "unknown" values (records) are held to the data model
	// as lexMap does (a record's were held to it before its validation
	// began). Params are parsed too (defaults, no unknowns).
	input, parse bool
}

func (v *validator) fail(msg string) *issue {
	return &issue{path: append([]seg(nil), v.path...), msg: msg}
}

// failAt fails at the property key of the value being validated.
func (v *validator) failAt(key, msg string) *issue {
	v.path = append(v.path, seg{key: key, idx: -1})
	is := v.fail(msg)
	v.path = v.path[:len(v.path)-1]
	return is
}

func (v *validator) child(key string, n *node, val any) *issue {
	v.path = append(v.path, seg{key: key, idx: -1})
	is := v.validate(n, val)
	v.path = v.path[:len(v.path)-1]
	return is
}

func (v *validator) validate(n *node, val any) *issue {
	switch n.kind {
	case kString:
		return v.string(n, val)
	case kInteger:
		i, ok := val.(int64)
		if !ok {
			return v.fail(msgInvalidType(val, "integer"))
		}
		if msg := n.value.check("integer", i); msg != "" {
			return v.fail(msg)
		}
	case kBoolean:
		if _, ok := val.(bool); !ok {
			return v.fail(msgInvalidType(val, "boolean"))
		}
	case kBytes:
		b, ok := val.([]byte)
		if !ok {
			return v.fail(msgInvalidType(val, "bytes"))
		}
		if msg := n.length.check("bytes", int64(len(b))); msg != "" {
			return v.fail(msg)
		}
	case kCID:
		if _, ok := val.(cid.Cid); !ok {
			return v.fail(msgInvalidType(val, "cid"))
		}
	case kBlob:
		return v.blob(n, val)
	case kUnknown:
		o, ok := val.(*object)
		if !ok {
			return v.fail(msgInvalidType(val, "object"))
		}
		if v.input {
			body := bodyCheck{path: v.path}
			is := body.values(o)
			v.path = body.path[:len(v.path)]
			return is
		}
	case kArray:
		arr, ok := val.([]any)
		if !ok {
			return v.fail(msgInvalidType(val, "array"))
		}
		if msg := n.length.check("array", int64(len(arr))); msg != "" {
			return v.fail(msg)
		}
		for i, x := range arr {
			v.path = append(v.path, seg{idx: i})
			is := v.validate(n.items, x)
			v.path = v.path[:len(v.path)-1]
			if is != nil {
				return is
			}
		}
	case kObject:
		o, ok := val.(*object)
		if !ok {
			return v.fail(msgInvalidType(val, "object"))
		}
		if t, ok := o.get("$type"); ok && n.name != "" && t != n.name {
			return v.failAt("$type", msgInvalidValue(t, n.name))
		}
		return v.object(n, o)
	case kRecord:
		o, ok := val.(*object)
		if !ok {
			return v.fail(msgInvalidType(val, "object"))
		}
		if is := v.object(n, o); is != nil {
			return is
		}
		if t, ok := o.get("$type"); !ok {
			return v.failAt("$type", msgInvalidValue(jsvalue.Undefined{}, n.name))
		} else if t != n.name {
			return v.failAt("$type", msgInvalidValue(t, n.name))
		}
	case kUnion:
		return v.union(n, val)
	case kToken:
		switch s, ok := val.(string); {
		case !ok:
			return v.fail(msgInvalidType(val, "token"))
		case s != n.name:
			return v.fail(msgInvalidValue(val, n.name))
		}
	case kLiteral, kEnum:
		for _, x := range n.values {
			if x == val {
				return nil
			}
		}
		return v.fail(msgInvalidValue(val, n.values...))
	case kNever:
		return v.fail(msgInvalidType(val, "never"))
	}
	return nil
}

func (v *validator) string(n *node, val any) *issue {
	s, ok := val.(string)
	if !ok {
		c, isCID := val.(cid.Cid)
		if !isCID {
			return v.fail(msgInvalidType(val, "string"))
		}
		// lex-schema reads a CID as its string; the value then "changed",
		// which validation (as opposed to parsing) reports.
		s = c.String()
		if is := v.stringChecks(n, s); is != nil {
			return is
		}
		return v.fail(msgInvalidValue(val, s))
	}
	return v.stringChecks(n, s)
}

func (v *validator) stringChecks(n *node, s string) *issue {
	if msg := n.length.check("string", int64(len(s))); msg != "" {
		return v.fail(msg)
	}
	if g := n.graphemes; g.hasMin || g.hasMax {
		// The reference counts graphemes only when String.length (UTF-16
		// units) does not settle it, and reports that length when it is
		// below the minimum.
		units := int64(jsvalue.Length(s))
		if g.hasMin {
			if units < g.min {
				return v.fail(msgTooSmall("grapheme", g.min, units))
			}
			if c := graphemeCount(s); c < g.min {
				return v.fail(msgTooSmall("grapheme", g.min, c))
			}
		}
		if g.hasMax && units > g.max {
			if c := graphemeCount(s); c > g.max {
				return v.fail(msgTooBig("grapheme", g.max, c))
			}
		}
	}
	if n.format != fmtNone && !n.format.valid(s) {
		return v.fail(msgInvalidFormat(s, n.format))
	}
	return nil
}

func (v *validator) object(n *node, o *object) *issue {
	for i := range n.props {
		p := &n.props[i]
		val, ok := o.get(p.name)
		if !ok {
			if p.optional || v.parse && p.hasDefault {
				continue
			}
			return v.fail(`Missing required key "` + p.name + `"`)
		}
		if val == nil && p.nullable {
			continue
		}
		if is := v.child(p.name, p.node, val); is != nil {
			return is
		}
	}
	if v.input {
		if msg := foldedKey(n, o); msg != "" {
			return v.fail(msg)
		}
	}
	return nil
}

func (v *validator) union(n *node, val any) *issue {
	o, ok := val.(*object)
	var t any
	if ok {
		t, ok = o.get("$type")
	}
	if !ok {
		return v.fail(msgInvalidType(val, `an object which includes the "$type" property`))
	}
	for _, r := range n.refs {
		if t == r.name {
			return v.validate(r, val)
		}
	}
	if n.closed {
		names := make([]any, len(n.refs))
		for i, r := range n.refs {
			names[i] = r.name
		}
		return v.failAt("$type", msgInvalidValue(t, names...))
	}
	if _, ok := t.(string); !ok {
		return v.failAt("$type", msgInvalidType(t, "string"))
	}
	return nil // open union: a type it does not list passes unchecked
}

func (v *validator) blob(n *node, val any) *issue {
	b, ok := typedBlob(val, true)
	if !ok {
		return v.fail(msgInvalidType(val, "blob"))
	}
	if len(n.accept) > 0 && !acceptsMime(n.accept, b.MimeType) {
		accept := make([]any, len(n.accept))
		for i, a := range n.accept {
			accept[i] = a
		}
		return v.failAt("mimeType", msgInvalidValue(b.MimeType, accept...))
	}
	if msg := n.maxSize.check("blob", b.Size); msg != "" {
		return v.fail(msg)
	}
	return nil
}

func acceptsMime(accept []string, mime string) bool {
	for _, a := range accept {
		if a == "*/*" || a == mime || strings.HasSuffix(a, "/*") && strings.HasPrefix(mime, a[:len(a)-1]) {
			return true
		}
	}
	return false
}

// graphemeCount counts extended grapheme clusters (uniseg v0.4.7,
// Unicode 15.0; the reference's ICU knows Unicode 17's conjunct rule).
func graphemeCount(s string) int64 { return int64(uniseg.GraphemeClusterCount(s)) }
