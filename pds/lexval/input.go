package lexval

import (
	"fmt"
	"strings"

	"github.com/bluesky-social/indigo/atproto/lexicon"
)

// InputEncoding is the encoding a procedure's lexicon declares for its
// input: "application/json", another media type ("*/*" for any), or ""
// when it takes none or the catalog does not know the method.
//
// It reads only the method's own lexicon, not compiling its input (as
// CheckInput does on the method's first call): the mux asks it of every
// method it registers, as the server starts, where compiling them all cost
// ~15 ms, half of the fakepds binary's start.
func InputEncoding(nsid string) (string, error) {
	return defaultCatalog().encoding(nsid)
}

// CheckInput checks a procedure's JSON input against its lexicon's input
// schema, as the reference does once it has authenticated the call
// (lex-schema's parse of the body after jsonToLex): properties in the
// lexicon's order, each union member by its $type, the values of
// "unknown" properties (records) held to the data model. The first issue
// is an *Error with the reference's message ("Expected string value type
// (got 5) at $.writes[0].collection"); a body that is not JSON is
// ErrSyntax. A method without a JSON input schema passes any JSON.
//
// One difference is on purpose: a key that differs only in case from a
// property of its object ("Repo" beside "repo") is refused, because the
// handlers' decoding (encoding/json) would read it as that property.
func CheckInput(nsid string, body []byte) (*Input, error) {
	in, err := defaultCatalog().input(nsid)
	if err != nil {
		return nil, err
	}
	v, err := parseJSON(body)
	if err != nil {
		if e, ok := err.(*Error); ok {
			return nil, e
		}
		return nil, ErrSyntax
	}
	if in != nil && in.schema != nil {
		stack := segStacks.Get().(*[]seg)
		val := validator{path: (*stack)[:0], input: true, parse: true}
		is := val.validate(in.schema, v)
		*stack = val.path
		putSegs(stack)
		if is != nil {
			return nil, &Error{Message: is.String(), Body: true}
		}
	}
	return &Input{root: v}, nil
}

// Input is a procedure's input as CheckInput parsed it, for the records
// it holds (PrepareValue).
type Input struct{ root any }

// Value is a value inside an Input.
type Value struct{ v any }

// Record is the value at path (object keys and array indexes), as
// Record("record") or Record("writes", 2, "value"); false when there is
// none. The value belongs to one PrepareValue: it changes the record.
func (in *Input) Record(path ...any) (Value, bool) {
	return Value{v: in.root}.Record(path...)
}

// Record is the value at path inside v, as Input.Record.
func (v Value) Record(path ...any) (Value, bool) {
	x := v.v
	for _, step := range path {
		switch s := step.(type) {
		case string:
			o, ok := x.(*object)
			if !ok {
				return Value{}, false
			}
			if x, ok = o.get(s); !ok {
				return Value{}, false
			}
		case int:
			a, ok := x.([]any)
			if !ok || s < 0 || s >= len(a) {
				return Value{}, false
			}
			x = a[s]
		default:
			return Value{}, false
		}
	}
	return Value{v: x}, true
}

// Str is the value as a string, false when it is not one.
func (v Value) Str() (string, bool) {
	s, ok := v.v.(string)
	return s, ok
}

// Bool is the value as a boolean, false when it is not one.
func (v Value) Bool() (b, ok bool) {
	b, ok = v.v.(bool)
	return b, ok
}

// Object reports whether the value is a JSON object.
func (v Value) Object() bool {
	_, ok := v.v.(*object)
	return ok
}

// Null reports whether the value is JSON null.
func (v Value) Null() bool { return v.v == nil }

// Len is the length of an array value, -1 for any other value.
func (v Value) Len() int {
	a, ok := v.v.([]any)
	if !ok {
		return -1
	}
	return len(a)
}

// ErrSyntax is a request body that is not JSON.
var ErrSyntax = &Error{Message: "Invalid JSON body"}

type methodInput struct {
	encoding string
	schema   *node // nil: no schema (any JSON)
}

// input compiles a procedure's input, nil when it has none or the catalog
// does not know it.
func (c *catalog) input(nsid string) (*methodInput, error) {
	return compiled(c, &c.inputs, nsid, func() (*methodInput, error) {
		s, err := c.base.Resolve(nsid)
		if err != nil {
			return nil, err
		}
		d, ok := s.Def.(lexicon.SchemaProcedure)
		if !ok || d.Input == nil {
			return nil, nil
		}
		in := &methodInput{encoding: d.Input.Encoding}
		if sd := d.Input.Schema; sd != nil {
			if o, ok := sd.Inner.(lexicon.SchemaObject); ok {
				in.schema = &node{kind: kObject}
				err = c.object(in.schema, nsid, &o, c.order[nsid+"#main/input"])
			} else {
				in.schema, err = c.contained(nsid, sd.Inner)
			}
			if err != nil {
				return nil, fmt.Errorf("lexval: compiling %s input: %w", nsid, err)
			}
		}
		return in, nil
	})
}

// foldedKey is the issue for a key that differs only in case from a
// property of o's schema n, or nil.
func foldedKey(n *node, o *object) string {
	for _, f := range o.fields {
		if n.param(f.key) != nil {
			continue
		}
		for i := range n.props {
			if strings.EqualFold(f.key, n.props[i].name) {
				return `Key "` + f.key + `" differs only in case from "` + n.props[i].name + `"`
			}
		}
	}
	return ""
}
