package conformance

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"
)

func TestNormalizer(t *testing.T) {
	n := NewNormalizer()
	n.Name("did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", "<did:alice>")
	n.Name("alice-1234.test", "<handle:alice>")
	n.Name("http://127.0.0.1:4567", "<pds-url>")
	jwt := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"at+jwt"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"did:plc:aaaaaaaaaaaaaaaaaaaaaaaa","iat":1700000000,"scope":"com.atproto.access"}`)) + ".c2ln"
	const cid1 = "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
	const cid2 = "bafyreib2rxk3rh6kzwq2xlnvlo4hfqbyhvu3zw2b4hgywn3ekvx6aavnaa"
	in := map[string]any{
		"uri":       "at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/app.bsky.feed.post/3kabcdefghij2",
		"cid":       cid1,
		"again":     []any{cid2, cid1},
		"rev":       "3kabcdefghij2",
		"other":     "did:plc:bbbbbbbbbbbbbbbbbbbbbbbb",
		"handle":    "alice-1234.test",
		"endpoint":  "http://127.0.0.1:4567",
		"local":     "http://localhost:9999/x",
		"createdAt": "2024-01-01T00:00:00.000Z",
		"message":   "Could not find did:plc:bbbbbbbbbbbbbbbbbbbbbbbb",
		"password":  "abcd-efgh-ijkl-mnop",
		"seq":       json.Number("42"),
		"size":      json.Number("70"),
		"ok":        true,
		"nsid":      "com.atproto.server.createSession",
		"word":      "authenticated", // 13 letters, not a TID
		"accessJwt": jwt,
	}
	got := n.Value("", in)
	want := map[string]any{
		"uri":       "at://<did:alice>/app.bsky.feed.post/<tid:1>",
		"cid":       "<cid:1>",
		"again":     []any{"<cid:2>", "<cid:1>"},
		"rev":       "<tid:1>",
		"other":     "<did:1>",
		"handle":    "<handle:alice>",
		"endpoint":  "<pds-url>",
		"local":     "http://localhost:<port>/x",
		"createdAt": "<datetime>",
		"message":   "Could not find <did:1>",
		"password":  "<string>",
		"seq":       "<number>",
		"size":      json.Number("70"),
		"ok":        true,
		"nsid":      "com.atproto.server.createSession",
		"word":      "authenticated",
		"accessJwt": map[string]any{"$jwt": map[string]any{
			"header":  map[string]any{"alg": "HS256", "typ": "at+jwt"},
			"payload": map[string]any{"sub": "<did:alice>", "iat": "<number>", "scope": "com.atproto.access"},
		}},
	}
	// Keys are walked in order, so numbering is stable: "again" comes
	// before "cid".
	want["again"] = []any{"<cid:1>", "<cid:2>"}
	want["cid"] = "<cid:2>"
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.MarshalIndent(got, "", " ")
		wb, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("normalized:\n%s\nwant:\n%s", gb, wb)
	}
}

func TestCompare(t *testing.T) {
	golden := &Transcript{Steps: []Step{
		{Name: "a", Call: "GET x", Status: 200, Body: map[string]any{"k": "v", "list": []any{1, 2}}},
		{Name: "b", Call: "GET y", Status: 400, Error: "InvalidRequest"},
		{Name: "gone", Call: "GET z", Status: 200},
	}}
	got := &Transcript{Steps: []Step{
		{Name: "a", Call: "GET x", Status: 200, Body: map[string]any{"k": "w", "list": []any{1}, "extra": nil}},
		{Name: "b", Call: "GET y", Status: 400, Error: "InvalidRequest"},
		{Name: "new", Call: "GET n", Status: 200},
	}}
	diffs := Compare(golden, got)
	want := []Diff{
		{Step: "a", Path: "body.k", Golden: `"v"`, Got: `"w"`},
		{Step: "a", Path: "body.list[1]", Golden: "2", Got: absent},
		{Step: "a", Path: "body.extra", Golden: absent, Got: "null"},
		{Step: "new", Path: "", Golden: absent, Got: "(step)"},
		{Step: "gone", Path: "", Golden: "(step)", Got: absent},
	}
	if !reflect.DeepEqual(diffs, want) {
		t.Errorf("diffs:\n%v\nwant:\n%v", diffs, want)
	}
	if d := Compare(golden, golden); len(d) != 0 {
		t.Errorf("a transcript differs from itself: %v", d)
	}
}

func TestCovers(t *testing.T) {
	k := Difference{Scenarios: []string{"s"}, Backends: []string{"inprocess"}, At: []string{"step one > body.x", "whole step", "* > body.didDoc"}}
	for _, c := range []struct {
		backend, scenario string
		d                 Diff
		want              bool
	}{
		{"inprocess", "s", Diff{Step: "step one", Path: "body.x"}, true},
		{"inprocess", "s", Diff{Step: "step one", Path: "body.x.y"}, true},
		{"inprocess", "s", Diff{Step: "step one", Path: "body.x[0]"}, true},
		{"inprocess", "s", Diff{Step: "step one", Path: "body.xy"}, false},
		{"inprocess", "s", Diff{Step: "step one", Path: "status"}, false},
		{"inprocess", "s", Diff{Step: "whole step", Path: "status"}, true},
		{"inprocess", "s", Diff{Step: "any", Path: "body.didDoc.id"}, true},
		{"docker", "s", Diff{Step: "whole step", Path: "status"}, false},
		{"inprocess", "other", Diff{Step: "whole step", Path: "status"}, false},
	} {
		if got := k.Covers(c.backend, c.scenario, c.d); got != c.want {
			t.Errorf("Covers(%s, %s, %+v) = %v, want %v", c.backend, c.scenario, c.d, got, c.want)
		}
	}
}
