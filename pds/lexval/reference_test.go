package lexval

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/jsvalue"
)

// The tests in this file hold the package to what the reference PDS's own
// code answers: testdata/reference.json is the output of
// testdata/oracle.mjs run on testdata/cases.json against the installed npm
// @atproto/pds (see the script for the command).

type testCases struct {
	Writes []struct {
		Name       string
		Collection string
		Rkey       string
		Validate   *bool
		Write      *int
		Record     json.RawMessage
		Raw        *string
	}
	Formats map[string][]string
}

type reference struct {
	Writes []struct {
		Name     string
		Error    string
		Body     bool
		Internal bool
		Status   *string
		CID      string
		Blobs    []struct {
			CID      string
			MimeType string
			Size     int64
		}
		JSON string
	}
	Formats []struct {
		Format string
		Value  string
		Valid  bool
	}
	Schemas map[string]any
}

func loadJSON[T any](t testing.TB, name string) T {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func TestReferenceWrites(t *testing.T) {
	t.Parallel()
	cases := loadJSON[testCases](t, "testdata/cases.json")
	ref := loadJSON[reference](t, "testdata/reference.json")
	if len(cases.Writes) != len(ref.Writes) {
		t.Fatalf("%d cases, %d reference answers: rerun testdata/oracle.mjs", len(cases.Writes), len(ref.Writes))
	}
	for i, c := range cases.Writes {
		want := ref.Writes[i]
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			if want.Name != c.Name {
				t.Fatalf("reference answer %d is for %q: rerun testdata/oracle.mjs", i, want.Name)
			}
			data := []byte(c.Record)
			if c.Raw != nil {
				data = []byte(*c.Raw)
			}
			var rec *Record
			var err error
			if c.Write != nil {
				rec, err = PrepareWrite(*c.Write, syntax.NSID(c.Collection), syntax.RecordKey(c.Rkey), data, c.Validate)
			} else {
				rec, err = Prepare(syntax.NSID(c.Collection), syntax.RecordKey(c.Rkey), data, c.Validate)
			}
			if want.Error != "" {
				var e *Error
				switch {
				case err == nil:
					t.Fatalf("accepted; the reference says %q", want.Error)
				case want.Internal:
					// The wire shows a 500 InternalServerError; messages
					// are compared where they come from the same place.
					if errors.As(err, &e) || strings.HasPrefix(want.Error, "Non-integer") != (err.Error() == want.Error) {
						t.Fatalf("error %#v, want an internal error (the reference: %q)", err, want.Error)
					}
				case !errors.As(err, &e):
					t.Fatalf("error %v is not an *Error; want %q", err, want.Error)
				case e.Message != want.Error || e.Body != want.Body:
					t.Fatalf("error\n got: %q (body %v)\nwant: %q (body %v)", e.Message, e.Body, want.Error, want.Body)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused (%v); the reference accepts it", err)
			}
			if string(rec.Status) != *want.Status {
				t.Errorf("status %q, want %q", rec.Status, *want.Status)
			}
			if rec.CID.String() != want.CID {
				t.Errorf("CID %s, want %s", rec.CID, want.CID)
			}
			var blobs []string
			for _, b := range rec.Blobs {
				blobs = append(blobs, b.Ref.String()+" "+b.MimeType+" "+jsvalue.Number(float64(b.Size)))
			}
			var wantBlobs []string
			for _, b := range want.Blobs {
				wantBlobs = append(wantBlobs, b.CID+" "+b.MimeType+" "+jsvalue.Number(float64(b.Size)))
			}
			if !reflect.DeepEqual(blobs, wantBlobs) {
				t.Errorf("blobs\n got: %q\nwant: %q", blobs, wantBlobs)
			}
			got, err := RecordJSON(rec.CBOR)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want.JSON {
				t.Errorf("RecordJSON\n got: %s\nwant: %s", got, want.JSON)
			}
		})
	}
}

func TestReferenceFormats(t *testing.T) {
	t.Parallel()
	ref := loadJSON[reference](t, "testdata/reference.json")
	for _, f := range ref.Formats {
		if got := formats[f.Format].valid(f.Value); got != f.Valid {
			t.Errorf("%s %q: valid %v, the reference says %v", f.Format, f.Value, got, f.Valid)
		}
	}
}

// TestReferenceSchemas compares the compiled record types with the ones
// the reference validates with: same record types, same properties in
// the same order, same constraints. It is what bounds the difference
// between the embedded lexicons and the reference's.
func TestReferenceSchemas(t *testing.T) {
	t.Parallel()
	ref := loadJSON[reference](t, "testdata/reference.json")
	got := schemaDump(t, newCatalog())
	for _, name := range sortedKeys(ref.Schemas, got) {
		w, ok1 := ref.Schemas[name]
		g, ok2 := got[name]
		switch {
		case !ok1:
			t.Errorf("%s: not in the reference", name)
		case !ok2:
			t.Errorf("%s: missing", name)
		case !reflect.DeepEqual(g, w):
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(w)
			t.Errorf("%s differs\n got: %s\nwant: %s", name, gj, wj)
		}
	}
}

func sortedKeys(a, b map[string]any) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// schemaDump is every record type of c and every def they reach, in the
// normalized form of oracle.mjs's schemas(), through a JSON round trip so
// that it compares with what was read from reference.json.
func schemaDump(t testing.TB, c *catalog) map[string]any {
	t.Helper()
	var queue []*node
	var names []string
	for nsid := range c.paths {
		names = append(names, nsid)
	}
	sort.Strings(names)
	for _, nsid := range names {
		n, err := c.record(nsid)
		if err != nil {
			t.Fatal(err)
		}
		if n != nil {
			queue = append(queue, n)
		}
	}
	seen := map[*node]bool{}
	for _, n := range queue {
		seen[n] = true
	}
	out := map[string]any{}
	var norm func(n *node) map[string]any
	// target is a ref to n: named defs by name, others inlined.
	target := func(n *node) map[string]any {
		if n.kind == kRecord || n.kind == kToken || n.kind == kObject && n.name != "" {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
			return map[string]any{"type": "ref", "ref": n.name}
		}
		return norm(n)
	}
	object := func(n *node) map[string]any {
		props := []any{}
		for _, p := range n.props {
			m := target(p.node)
			if p.optional {
				m["optional"] = true
			}
			if p.nullable {
				m["nullable"] = true
			}
			props = append(props, []any{p.name, m})
		}
		return map[string]any{"type": "object", "properties": props}
	}
	lengths := func(m map[string]any, b bounds, min, max string) map[string]any {
		if b.hasMin {
			m[min] = b.min
		}
		if b.hasMax {
			m[max] = b.max
		}
		return m
	}
	norm = func(n *node) map[string]any {
		switch n.kind {
		case kRecord:
			key := "any"
			switch {
			case n.key.kind == kLiteral:
				key = "literal:" + n.key.values[0].(string)
			case n.key.format == fmtTID:
				key = "tid"
			case n.key.format == fmtNSID:
				key = "nsid"
			}
			return map[string]any{"type": "record", "key": key, "record": object(n)}
		case kObject:
			return object(n)
		case kToken:
			return map[string]any{"type": "token", "value": n.name}
		case kString:
			m := lengths(map[string]any{"type": "string"}, n.length, "minLength", "maxLength")
			lengths(m, n.graphemes, "minGraphemes", "maxGraphemes")
			if n.format != fmtNone {
				for name, f := range formats {
					if f == n.format {
						m["format"] = name
					}
				}
			}
			return m
		case kInteger:
			return lengths(map[string]any{"type": "integer"}, n.value, "minimum", "maximum")
		case kBytes:
			return lengths(map[string]any{"type": "bytes"}, n.length, "minLength", "maxLength")
		case kBlob:
			m := lengths(map[string]any{"type": "blob"}, n.maxSize, "", "maxSize")
			if n.accept != nil {
				m["accept"] = n.accept
			}
			return m
		case kArray:
			return lengths(map[string]any{"type": "array", "items": target(n.items)}, n.length, "minLength", "maxLength")
		case kLiteral:
			return map[string]any{"type": "literal", "value": n.values[0]}
		case kEnum:
			return map[string]any{"type": "enum", "values": n.values}
		case kUnion:
			refs := []any{}
			for _, r := range n.refs {
				refs = append(refs, target(r)["ref"])
			}
			return map[string]any{"type": "union", "refs": refs, "closed": n.closed}
		case kBoolean:
			return map[string]any{"type": "boolean"}
		case kCID:
			return map[string]any{"type": "cid"}
		case kUnknown:
			return map[string]any{"type": "lexMap"}
		case kNever:
			return map[string]any{"type": "never"}
		}
		t.Fatalf("unknown node kind %d", n.kind)
		return nil
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		out[n.name] = norm(n)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
