package lexval

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/bluesky-social/indigo/atproto/lexicon"
)

// CheckParams checks the query parameters of a call to the method nsid, as
// the reference does before it authenticates the call (lex-schema's
// ParamsSchema.fromURLSearchParams): rawQuery's values are taken in order,
// empty ones skipped; a value that cannot be coerced to its parameter's
// type fails at once; then every parameter is checked in the lexicon's
// order. The first issue is an *Error "Invalid <nsid> params: <issue>". A
// method the catalog has no lexicon for, or whose lexicon declares no
// parameters, passes.
func CheckParams(nsid, rawQuery string) error {
	n, err := defaultCatalog().parameters(nsid)
	if err != nil || n == nil {
		return err
	}
	fail := func(msg string) error {
		return &Error{Message: "Invalid " + nsid + " params: " + msg}
	}
	params := &object{}
	if rawQuery != "" {
		params.fields = make([]field, 0, strings.Count(rawQuery, "&")+1)
	}
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		k, v, _ := strings.Cut(kv, "=")
		key, val := queryUnescape(k), queryUnescape(v)
		if val == "" {
			continue
		}
		p := n.param(key)
		var coerced any = val
		isArray := false
		if p != nil {
			scalar := p.node
			if scalar.kind == kArray {
				scalar, isArray = scalar.items, true
			}
			var msg string
			if coerced, msg = coerceParam(scalar, val, coerced); msg != "" {
				return fail(msg)
			}
		}
		switch cur, ok := params.get(key); {
		case !ok && isArray:
			params.fields = append(params.fields, field{key, []any{coerced}})
		case !ok:
			params.fields = append(params.fields, field{key, coerced})
		default:
			arr, isArr := cur.([]any)
			if !isArr {
				arr = []any{cur}
			}
			params.set(key, append(arr, coerced))
		}
	}
	v := validator{parse: true}
	if is := v.object(n, params); is != nil {
		return fail(is.msg)
	}
	return nil
}

// intParam is /^-?[0-9]+$/, lex-schema's test of an integer parameter.
func intParam(s string) bool {
	if s != "" && s[0] == '-' {
		s = s[1:]
	}
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// coerceParam is lex-schema's coerceParam: a query value read as the
// parameter's scalar type, or the message. boxed is s as an any,
// the value of a string parameter (boxing it again would allocate again).
func coerceParam(n *node, s string, boxed any) (any, string) {
	switch n.kind {
	case kInteger:
		if intParam(s) {
			f, _ := strconv.ParseFloat(s, 64)
			return number(f), ""
		}
		return nil, msgInvalidType(s, "integer")
	case kBoolean:
		switch s {
		case "true":
			return true, ""
		case "false":
			return false, ""
		}
		return nil, msgInvalidType(s, "boolean")
	case kLiteral, kEnum:
		for _, v := range n.values {
			if fmt.Sprint(v) == s {
				return v, ""
			}
		}
		return nil, msgInvalidValue(s, n.values...)
	}
	return boxed, ""
}

func (n *node) param(key string) *prop {
	for i := range n.props {
		if n.props[i].name == key {
			return &n.props[i]
		}
	}
	return nil
}

func (o *object) set(key string, v any) {
	for i := range o.fields {
		if o.fields[i].key == key {
			o.fields[i].val = v
			return
		}
	}
	o.fields = append(o.fields, field{key, v})
}

// parameters returns the compiled parameters of a method, nil when it has
// none or the catalog does not know it.
func (c *catalog) parameters(nsid string) (*node, error) {
	return compiled(c, &c.params, nsid, func() (*node, error) {
		s, err := c.base.Resolve(nsid)
		if err != nil {
			return nil, err
		}
		var ps *lexicon.SchemaParams
		switch d := s.Def.(type) {
		case lexicon.SchemaQuery:
			ps = d.Parameters
		case lexicon.SchemaProcedure:
			ps = d.Parameters
		case lexicon.SchemaSubscription:
			ps = d.Parameters
		}
		if ps == nil || len(ps.Properties) == 0 {
			return nil, nil
		}
		n := &node{kind: kObject}
		obj := lexicon.SchemaObject{Properties: ps.Properties, Required: ps.Required}
		if err := c.object(n, nsid, &obj, c.order[nsid+"#main/parameters"]); err != nil {
			return nil, fmt.Errorf("lexval: compiling %s parameters: %w", nsid, err)
		}
		return n, nil
	})
}

// queryUnescape decodes a query component as URLSearchParams does, which
// keeps a malformed escape as it is.
func queryUnescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return strings.ReplaceAll(s, "+", " ")
}
