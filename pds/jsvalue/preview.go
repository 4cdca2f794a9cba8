package jsvalue

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// previewMax is where lex-schema cuts a string it quotes, in UTF-16 code
// units, the ellipsis included.
const previewMax = 256

// Preview is how @atproto/lex-schema's validation messages show a value
// (stringifyValue in core/validation-issue.js): numbers and booleans by
// String, strings quoted and cut to 255 code units plus "…", arrays by
// their first two items and objects ([Object]) by their first two keys,
// "[1, 2, ...]" and "{"a": ..., "b": ...}", null as "null", [Undefined] as
// "undefined". Any other value is "object"; see [PreviewWith].
func Preview(v any) string { return PreviewWith(v, nil) }

// PreviewWith is Preview with name describing the values Preview does not
// know, at any depth: lex-schema names a CID "cid", a Uint8Array "object".
// A nil name, or one that answers "", leaves them "object".
func PreviewWith(v any, name func(any) string) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case Undefined:
		return "undefined"
	case bool, int64, int, float64:
		return String(v)
	case string:
		return previewString(v)
	case []any:
		return "[" + previewList(len(v), func(i int) string { return PreviewWith(v[i], name) }) + "]"
	case Object:
		keys := v.Keys()
		return "{" + previewList(len(keys), func(i int) string { return Quote(keys[i]) + ": ..." }) + "}"
	}
	if name != nil {
		if s := name(v); s != "" {
			return s
		}
	}
	return "object"
}

func previewString(s string) string {
	if len(s) < previewMax || Length(s) < previewMax {
		return Quote(s)
	}
	u := utf16.Encode([]rune(s))[:previewMax-1]
	return QuoteUnits(append(u, '…'))
}

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

// PreviewJSON is Preview of the value a JSON text parses to with
// JSON.parse; a text that does not parse previews as it is.
func PreviewJSON(raw []byte) string {
	v, err := decodeJSON(raw)
	if err != nil {
		return string(raw)
	}
	return Preview(v)
}

// keys is an object's keys in enumeration order; Preview needs no values.
type keys []string

func (k keys) Keys() []string { return k }

// SortKeys orders ks as JavaScript enumerates an object's own keys: array
// indexes ascending, then the rest in insertion order. ks holds each key
// once, in insertion order.
func SortKeys(ks []string) { slices.SortStableFunc(ks, CompareKeys) }

// CompareKeys is the order of [SortKeys] for a stable sort: array indexes
// first, ascending; any two other keys compare equal (insertion order).
func CompareKeys(a, b string) int {
	ia, ib := IsArrayIndex(a), IsArrayIndex(b)
	switch {
	case ia && ib:
		na, _ := strconv.ParseUint(a, 10, 64)
		nb, _ := strconv.ParseUint(b, 10, 64)
		return cmp.Compare(na, nb)
	case ia:
		return -1
	case ib:
		return 1
	}
	return 0
}

// decodeJSON reads a JSON text into the values Preview knows, objects as
// their keys in JavaScript order (a repeated key keeps its first place).
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errTrailing
	}
	return v, nil
}

var errTrailing = errors.New("jsvalue: text after the JSON value")

func decodeValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		if t == '[' {
			var items []any
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return items, err
		}
		var ks keys
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
			if _, err := decodeValue(dec); err != nil {
				return nil, err
			}
		}
		SortKeys(ks)
		_, err := dec.Token()
		return ks, err
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && f == 0 {
			return nil, err
		}
		return f, nil // an out-of-range number is ±Infinity, as JSON.parse
	}
	return t, nil
}
