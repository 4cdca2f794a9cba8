package lexval

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/bluesky-social/indigo/atproto/lexicon"
)

// The lexicons: indigo's copy of the public schemas, and the reference's
// own copy of the few it has newer than indigo (see lexicons/README.md).
//
//go:embed lexicons/indigo lexicons/reference
var lexiconFiles embed.FS

// catalog compiles record types on first use. Finding a file is a map
// lookup; only the files a collection's schema reaches are parsed.
type catalog struct {
	paths map[string]string // NSID -> embedded file; reference over indigo

	records sync.Map // NSID with a lexicon -> *node, nil when not a record type
	params  sync.Map // method NSID -> *node of its parameters, nil when it has none
	inputs  sync.Map // method NSID -> *methodInput
	encs    sync.Map // method NSID -> its input encoding (string)

	mu     sync.Mutex // guards what follows: compiling
	base   *lexicon.BaseCatalog
	loaded map[string]bool
	order  map[string][]string // "nsid#def" -> property names in file order
	nodes  map[string]*node    // compiled defs by $type-style name
}

// defaultCatalog is built once, lazily: the server's startup never pays
// for it.
var defaultCatalog = sync.OnceValue(newCatalog)

func newCatalog() *catalog {
	c := &catalog{
		paths:  map[string]string{},
		base:   lexicon.NewBaseCatalog(),
		loaded: map[string]bool{},
		order:  map[string][]string{},
		nodes:  map[string]*node{},
	}
	for _, dir := range []string{"lexicons/indigo", "lexicons/reference"} {
		_ = fs.WalkDir(lexiconFiles, dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
				nsid := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(p, dir+"/"), ".json"), "/", ".")
				c.paths[nsid] = p
			}
			return nil
		})
	}
	return c
}

// record returns the compiled schema of a record type, or nil when the
// catalog has no record type of that name.
func (c *catalog) record(collection string) (*node, error) {
	return compiled(c, &c.records, collection, func() (*node, error) {
		// A lexicon without a main record def (defs, queries) is no
		// record type.
		s, err := c.base.Resolve(collection)
		if err != nil || !isRecord(s) {
			return nil, nil
		}
		n, err := c.def(collection)
		if err != nil {
			return nil, fmt.Errorf("lexval: compiling %s: %w", collection, err)
		}
		return n, nil
	})
}

// compiled is m's entry for nsid (a record type, a method's params or
// input), compiled on first use under c.mu once nsid's lexicon is loaded;
// nil when the catalog has no lexicon of that name, which is not cached.
func compiled[T any](c *catalog, m *sync.Map, nsid string, compile func() (*T, error)) (*T, error) {
	if v, ok := m.Load(nsid); ok {
		return v.(*T), nil
	}
	if _, ok := c.paths[nsid]; !ok {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := m.Load(nsid); ok {
		return v.(*T), nil
	}
	if err := c.load(nsid); err != nil {
		return nil, err
	}
	v, err := compile()
	if err != nil {
		return nil, err
	}
	m.Store(nsid, v)
	return v, nil
}

func isRecord(s *lexicon.Schema) bool {
	_, ok := s.Def.(lexicon.SchemaRecord)
	return ok
}

// encoding is a method's input encoding as its own lexicon file declares
// it ("" for none, or no such method), read without loading the file into
// the catalog (see InputEncoding).
func (c *catalog) encoding(nsid string) (string, error) {
	if v, ok := c.encs.Load(nsid); ok {
		return v.(string), nil
	}
	p, ok := c.paths[nsid]
	if !ok {
		return "", nil
	}
	b, err := lexiconFiles.ReadFile(p)
	if err != nil {
		return "", err
	}
	var f struct {
		Defs struct {
			Main struct {
				Type  string `json:"type"`
				Input *struct {
					Encoding string `json:"encoding"`
				} `json:"input"`
			} `json:"main"`
		} `json:"defs"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("lexval: %s: %w", p, err)
	}
	enc := ""
	if m := f.Defs.Main; m.Type == "procedure" && m.Input != nil {
		enc = m.Input.Encoding
	}
	c.encs.Store(nsid, enc)
	return enc, nil
}

// load adds a lexicon file to the indigo catalog and notes its property
// order, which indigo's schema types (maps) do not keep but validation
// messages show: the reference checks properties in file order.
func (c *catalog) load(nsid string) error {
	if c.loaded[nsid] {
		return nil
	}
	p, ok := c.paths[nsid]
	if !ok {
		return fmt.Errorf("lexval: no lexicon %s", nsid)
	}
	b, err := lexiconFiles.ReadFile(p)
	if err != nil {
		return err
	}
	var sf lexicon.SchemaFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return fmt.Errorf("lexval: %s: %w", p, err)
	}
	if sf.ID != nsid {
		return fmt.Errorf("lexval: %s holds %s", p, sf.ID)
	}
	if err := c.base.AddSchemaFile(sf); err != nil {
		return fmt.Errorf("lexval: %s: %w", p, err)
	}
	var order struct {
		Defs map[string]struct {
			Properties keyOrder `json:"properties"`
			Record     struct {
				Properties keyOrder `json:"properties"`
			} `json:"record"`
			Parameters struct {
				Properties keyOrder `json:"properties"`
			} `json:"parameters"`
			Input struct {
				Schema struct {
					Properties keyOrder `json:"properties"`
				} `json:"schema"`
			} `json:"input"`
		} `json:"defs"`
	}
	if err := json.Unmarshal(b, &order); err != nil {
		return fmt.Errorf("lexval: %s: %w", p, err)
	}
	for name, d := range order.Defs {
		keys := d.Properties
		if keys == nil {
			keys = d.Record.Properties
		}
		c.order[nsid+"#"+name] = keys
		if d.Parameters.Properties != nil {
			c.order[nsid+"#"+name+"/parameters"] = d.Parameters.Properties
		}
		if d.Input.Schema.Properties != nil {
			c.order[nsid+"#"+name+"/input"] = d.Input.Schema.Properties
		}
	}
	c.loaded[nsid] = true
	return nil
}

// keyOrder is the keys of a JSON object, in order.
type keyOrder []string

func (k *keyOrder) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("properties: not an object")
	}
	*k = keyOrder{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		*k = append(*k, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// def compiles a named definition ("nsid" for main, else "nsid#name").
// Refs share the node of their target, so recursive schemas close on
// themselves.
func (c *catalog) def(name string) (*node, error) {
	if n, ok := c.nodes[name]; ok {
		return n, nil
	}
	nsid, frag, ok := strings.Cut(name, "#")
	if !ok {
		frag = "main"
	}
	if err := c.load(nsid); err != nil {
		return nil, err
	}
	s, err := c.base.Resolve(nsid + "#" + frag)
	if err != nil {
		return nil, err
	}
	n := &node{name: name}
	c.nodes[name] = n
	switch d := s.Def.(type) {
	case lexicon.SchemaRecord:
		n.kind = kRecord
		if n.key, err = keySchema(d.Key); err == nil {
			err = c.object(n, nsid, &d.Record, c.order[nsid+"#"+frag])
		}
	case lexicon.SchemaObject:
		n.kind = kObject
		err = c.object(n, nsid, &d, c.order[nsid+"#"+frag])
	case lexicon.SchemaToken:
		n.kind = kToken
	default:
		var m *node
		if m, err = c.contained(nsid, d); err == nil {
			*n = *m
		}
	}
	if err != nil {
		delete(c.nodes, name)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

func (c *catalog) object(n *node, nsid string, o *lexicon.SchemaObject, order []string) error {
	if len(order) != len(o.Properties) {
		return errors.New("property order unknown")
	}
	for _, name := range order {
		p, err := c.contained(nsid, o.Properties[name].Inner)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		n.props = append(n.props, prop{
			name:       name,
			node:       p,
			optional:   !slices.Contains(o.Required, name),
			nullable:   slices.Contains(o.Nullable, name),
			hasDefault: hasDefault(o.Properties[name].Inner),
		})
	}
	return nil
}

// contained compiles a type used in a property or array, the way
// lex-builder's compileContainedSchema does.
func (c *catalog) contained(nsid string, def any) (*node, error) {
	switch d := def.(type) {
	case lexicon.SchemaString:
		switch {
		case d.Const != nil:
			return constant(*d.Const, d.Enum), nil
		case d.Enum != nil:
			return enum(d.Enum), nil
		}
		n := &node{kind: kString, length: bound(d.MinLength, d.MaxLength), graphemes: bound(d.MinGraphemes, d.MaxGraphemes)}
		if d.Format != nil {
			f, ok := formats[*d.Format]
			if !ok {
				return nil, fmt.Errorf("unknown string format %q", *d.Format)
			}
			n.format = f
		}
		return n, nil
	case lexicon.SchemaInteger:
		switch {
		case d.Const != nil:
			return constant(int64(*d.Const), toInt64s(d.Enum)), nil
		case d.Enum != nil:
			return enum(toInt64s(d.Enum)), nil
		}
		return &node{kind: kInteger, value: bound(d.Minimum, d.Maximum)}, nil
	case lexicon.SchemaBoolean:
		if d.Const != nil {
			return &node{kind: kLiteral, values: []any{*d.Const}}, nil
		}
		return &node{kind: kBoolean}, nil
	case lexicon.SchemaBytes:
		return &node{kind: kBytes, length: bound(d.MinLength, d.MaxLength)}, nil
	case lexicon.SchemaBlob:
		return &node{kind: kBlob, accept: d.Accept, maxSize: bound(nil, d.MaxSize)}, nil
	case lexicon.SchemaCIDLink:
		return &node{kind: kCID}, nil
	case lexicon.SchemaUnknown:
		return &node{kind: kUnknown}, nil
	case lexicon.SchemaArray:
		items, err := c.contained(nsid, d.Items.Inner)
		if err != nil {
			return nil, err
		}
		return &node{kind: kArray, items: items, length: bound(d.MinLength, d.MaxLength)}, nil
	case lexicon.SchemaRef:
		return c.def(refName(nsid, d.Ref))
	case lexicon.SchemaUnion:
		closed := d.Closed != nil && *d.Closed
		if len(d.Refs) == 0 && closed {
			return &node{kind: kNever}, nil
		}
		n := &node{kind: kUnion, closed: closed}
		for _, r := range d.Refs {
			m, err := c.def(refName(nsid, r))
			if err != nil {
				return nil, err
			}
			n.refs = append(n.refs, m)
		}
		return n, nil
	}
	return nil, fmt.Errorf("unsupported type %T", def)
}

// refName is a lexicon ref as a $type: "#x" is local, "#main" dropped.
func refName(nsid, ref string) string {
	if strings.HasPrefix(ref, "#") {
		ref = nsid + ref
	}
	return strings.TrimSuffix(ref, "#main")
}

func bound(min, max *int) bounds {
	var b bounds
	if min != nil {
		b.min, b.hasMin = int64(*min), true
	}
	if max != nil {
		b.max, b.hasMax = int64(*max), true
	}
	return b
}

func toInt64s(v []int) []int64 {
	if v == nil {
		return nil
	}
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// constant is a "const" (lex-builder: a literal, or never when an "enum"
// beside it leaves the constant out).
func constant[T comparable](v T, enum []T) *node {
	if enum != nil && !slices.Contains(enum, v) {
		return &node{kind: kNever}
	}
	return &node{kind: kLiteral, values: []any{v}}
}

func enum[T comparable](values []T) *node {
	switch len(values) {
	case 0:
		return &node{kind: kNever}
	case 1:
		return &node{kind: kLiteral, values: []any{values[0]}}
	}
	n := &node{kind: kEnum}
	for _, v := range values {
		n.values = append(n.values, v)
	}
	return n
}

// keySchema compiles a record's "key" into the check the reference makes
// of a record key.
func keySchema(key string) (*node, error) {
	switch {
	case key == "any" || key == "":
		return &node{kind: kString, format: fmtRecordKey}, nil
	case key == "tid":
		return &node{kind: kString, format: fmtTID}, nil
	case key == "nsid":
		return &node{kind: kString, format: fmtNSID}, nil
	case strings.HasPrefix(key, "literal:"):
		return &node{kind: kLiteral, values: []any{key[len("literal:"):]}}, nil
	}
	return nil, fmt.Errorf("unsupported record key type %q", key)
}

// hasDefault reports whether a property's schema gives a default value.
func hasDefault(def any) bool {
	switch d := def.(type) {
	case lexicon.SchemaString:
		return d.Default != nil
	case lexicon.SchemaInteger:
		return d.Default != nil
	case lexicon.SchemaBoolean:
		return d.Default != nil
	}
	return false
}
