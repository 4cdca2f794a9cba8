package lexval

import (
	"encoding/base64"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/jsvalue"
)

// A record's data is held as the reference holds it after jsonToLex:
//
//	nil, bool, string
//	int64       a number that is a safe integer (|n| <= 2^53-1)
//	float64     any other number (only integral ones survive the body check)
//	cid.Cid     a {"$link": ...} object
//	[]byte      a {"$bytes": ...} object
//	[]any       an array
//	*object     any other object, keys in JavaScript property order
//
// Blobs stay plain objects whose "ref" is a cid.Cid, as in the reference.

// object is a JSON object with its keys in the order JavaScript enumerates
// them: array-index keys ascending, then the others in insertion order.
// Messages quote the first keys of an object, so the order shows.
type object struct {
	fields []field
}

type field struct {
	key string
	val any
}

func (o *object) get(key string) (any, bool) {
	for i := range o.fields {
		if o.fields[i].key == key {
			return o.fields[i].val, true
		}
	}
	return nil, false
}

const maxSafeInteger = 1<<53 - 1

var errJSON = errors.New("invalid JSON")

// parseJSON decodes a JSON text the way the reference's body parser and
// jsonToLex (non-strict) do: a later duplicate key replaces the value in
// the first one's place; {"$link"} and {"$bytes"} objects that do not parse
// stay plain objects; a "__proto__" key is refused.
func parseJSON(data []byte) (any, error) {
	// One copy of the input as a string: strings without escapes, keys
	// included, are slices of it.
	d := decoders.Get().(*decoder)
	defer d.release()
	d.data = string(data)
	d.space()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.pos != len(d.data) {
		return nil, errJSON
	}
	return v, nil
}

// decoders keep their scratch stacks between records.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

func (d *decoder) release() {
	if cap(d.buf) > 1<<16 || cap(d.fields) > 1<<12 || cap(d.items) > 1<<12 {
		return // an outsized record: let its scratch go
	}
	clear(d.fields)
	clear(d.items)
	*d = decoder{buf: d.buf[:0], fields: d.fields[:0], items: d.items[:0]}
	decoders.Put(d)
}

type decoder struct {
	data   string
	pos    int
	buf    []byte  // scratch for strings with escapes
	fields []field // scratch stack of the objects being read
	items  []any   // scratch stack of the arrays being read

	// Objects and their contents are carved from chunks, a few
	// allocations per record rather than a few per object.
	objectChunk []object
	fieldChunk  []field
	itemChunk   []any
}

func (d *decoder) newObject(fields []field) *object {
	if len(d.objectChunk) == cap(d.objectChunk) {
		d.objectChunk = make([]object, 0, 16)
	}
	d.objectChunk = append(d.objectChunk, object{fields: d.carveFields(fields)})
	return &d.objectChunk[len(d.objectChunk)-1]
}

func (d *decoder) carveFields(f []field) []field {
	if cap(d.fieldChunk)-len(d.fieldChunk) < len(f) {
		d.fieldChunk = make([]field, 0, max(64, len(f)))
	}
	n := len(d.fieldChunk)
	d.fieldChunk = append(d.fieldChunk, f...)
	return d.fieldChunk[n:len(d.fieldChunk):len(d.fieldChunk)]
}

func (d *decoder) carveItems(v []any) []any {
	if cap(d.itemChunk)-len(d.itemChunk) < len(v) {
		d.itemChunk = make([]any, 0, max(32, len(v)))
	}
	n := len(d.itemChunk)
	d.itemChunk = append(d.itemChunk, v...)
	return d.itemChunk[n:len(d.itemChunk):len(d.itemChunk)]
}

// maxDepth bounds nesting; the reference's body limit bounds it there.
const maxDepth = 10000

func (d *decoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if d.pos >= len(d.data) || depth > maxDepth {
		return nil, errJSON
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.string()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return nil, errJSON
}

func (d *decoder) literal(s string) error {
	if len(d.data)-d.pos < len(s) || d.data[d.pos:d.pos+len(s)] != s {
		return errJSON
	}
	d.pos += len(s)
	return nil
}

func (d *decoder) number() (any, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	intStart := d.pos
	if n := digits(); n == 0 || n > 1 && d.data[intStart] == '0' {
		return nil, errJSON
	}
	plain := true
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return nil, errJSON
		}
		plain = false
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, errJSON
		}
		plain = false
	}
	text := d.data[start:d.pos]
	if plain && d.pos-intStart <= 15 {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, errJSON
		}
		return n, nil
	}
	// JavaScript numbers are doubles: 1.0 and 1e2 are the integers 1 and 100.
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, errJSON
	}
	return number(f), nil
}

// number is f as the data model holds it: an int64 when JavaScript's
// Number.isSafeInteger(f) holds, else the float64.
func number(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) <= maxSafeInteger {
		return int64(f)
	}
	return f
}

func (d *decoder) string() (string, error) {
	d.pos++ // opening quote
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := d.data[start:d.pos]
			d.pos++
			if utf8.ValidString(s) {
				return s, nil
			}
			return string([]rune(s)), nil // invalid bytes become U+FFFD
		}
		if c == '\\' || c < 0x20 {
			break
		}
		d.pos++
	}
	// slow path: escapes
	d.buf = append(d.buf[:0], d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			s := d.buf
			if !utf8.Valid(s) {
				return string([]rune(string(s))), nil
			}
			return string(s), nil
		case c < 0x20:
			return "", errJSON
		case c != '\\':
			d.buf = append(d.buf, c)
			d.pos++
			continue
		}
		d.pos++
		if d.pos >= len(d.data) {
			return "", errJSON
		}
		e := d.data[d.pos]
		d.pos++
		switch e {
		case '"', '\\', '/':
			d.buf = append(d.buf, e)
		case 'b':
			d.buf = append(d.buf, '\b')
		case 'f':
			d.buf = append(d.buf, '\f')
		case 'n':
			d.buf = append(d.buf, '\n')
		case 'r':
			d.buf = append(d.buf, '\r')
		case 't':
			d.buf = append(d.buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", errJSON
			}
			if utf16.IsSurrogate(r) {
				// A pair makes one code point. A lone surrogate cannot be
				// stored (the reference's CBOR encoder writes U+FFFD), so
				// it becomes U+FFFD here already.
				r2 := rune(-1)
				if r < 0xdc00 && d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
					save := d.pos
					d.pos += 2
					if x, ok := d.hex4(); ok && x >= 0xdc00 && x <= 0xdfff {
						r2 = x
					} else {
						d.pos = save
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			d.buf = utf8.AppendRune(d.buf, r)
		default:
			return "", errJSON
		}
	}
	return "", errJSON
}

func (d *decoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	d.pos += 4
	return r, true
}

func (d *decoder) array(depth int) (any, error) {
	d.pos++
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return []any{}, nil
	}
	base := len(d.items)
	for {
		d.space()
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		d.items = append(d.items, v)
		d.space()
		if d.pos >= len(d.data) {
			return nil, errJSON
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			continue
		case ']':
			d.pos++
		default:
			return nil, errJSON
		}
		break
	}
	arr := d.carveItems(d.items[base:])
	clear(d.items[base:])
	d.items = d.items[:base]
	return arr, nil
}

// errProtoKey is jsonToLex's refusal of a "__proto__" key.
func errProtoKey() error { return &Error{Message: "Invalid key: __proto__", Body: true} }

func (d *decoder) object(depth int) (any, error) {
	d.pos++
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return &object{}, nil
	}
	base := len(d.fields)
	indexKeys := false
	for {
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, errJSON
		}
		k, err := d.string()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, errJSON
		}
		d.pos++
		d.space()
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if k == "__proto__" {
			return nil, errProtoKey()
		}
		replaced := false
		for i := base; i < len(d.fields); i++ {
			if d.fields[i].key == k {
				d.fields[i].val = v
				replaced = true
				break
			}
		}
		if !replaced {
			d.fields = append(d.fields, field{k, v})
			indexKeys = indexKeys || jsvalue.IsArrayIndex(k)
		}
		d.space()
		if d.pos >= len(d.data) {
			return nil, errJSON
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			continue
		case '}':
			d.pos++
		default:
			return nil, errJSON
		}
		break
	}
	o := d.newObject(d.fields[base:])
	clear(d.fields[base:])
	d.fields = d.fields[:base]
	if indexKeys {
		o.orderIndexKeys()
	}
	return special(o), nil
}

// special turns {"$link": cid} and {"$bytes": base64} into their values,
// as lex-json's jsonToLex does outside strict mode: anything that does not
// parse stays an ordinary object.
func special(o *object) any {
	if len(o.fields) != 1 {
		return o
	}
	s, ok := o.fields[0].val.(string)
	if !ok {
		return o
	}
	switch o.fields[0].key {
	case "$link":
		if len(s) == 0 || len(s) > 128 {
			return o
		}
		c, err := cid.Decode(s)
		if err != nil || !cidParsesInJS(s) {
			return o
		}
		return c
	case "$bytes":
		if b, ok := decodeBase64(s); ok {
			return b
		}
	}
	return o
}

// cidParsesInJS reports whether multiformats' CID.parse takes s without a
// base decoder: base58btc CIDv0 ("Qm...") or a multibase base32, base36
// or base58btc string. go-cid takes any multibase.
func cidParsesInJS(s string) bool {
	switch s[0] {
	case 'Q', 'b', 'k', 'z':
		return true
	}
	return false
}

// decodeBase64 decodes what lex-data's fromBase64 takes under Node (the
// reference's runtime): either alphabet, no stray characters, padding
// optional but never more than the last quantum needs, a dangling single
// character refused, non-zero trailing bits ignored.
func decodeBase64(s string) ([]byte, bool) {
	n := len(s)
	for n > 0 && s[n-1] == '=' && len(s)-n < 2 {
		n--
	}
	t := s[:n]
	if len(t)%4 == 1 || len(s) > (len(t)+3)/4*4 {
		return nil, false
	}
	url := false
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
		case c == '-' || c == '_':
			url = true
		default:
			return nil, false
		}
	}
	if url {
		t = strings.NewReplacer("-", "+", "_", "/").Replace(t)
	}
	b, err := base64.RawStdEncoding.DecodeString(t)
	return b, err == nil
}

// orderIndexKeys moves array-index keys first, ascending, as JavaScript
// property enumeration does.
func (o *object) orderIndexKeys() {
	slices.SortStableFunc(o.fields, func(a, b field) int { return jsvalue.CompareKeys(a.key, b.key) })
}
