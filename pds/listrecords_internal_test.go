package pds

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// TestListRecordsJSON: the hand-written listRecords answer is the bytes
// xrpc.WriteJSON makes of the same page (HTML characters, U+2028 and
// non-ASCII text in values, with and without a cursor, a cursor too long
// for the room kept in front, no records; a CIDv0, a DID and a record key
// that need quoting).
func TestListRecordsJSON(t *testing.T) {
	texts := []string{"plain", "<b>&amp;</b>", "line\u2028sep \"quoted\" \\ é 🦋", ""}
	var recs []repo.Record
	for i, text := range texts {
		raw, err := atdata.MarshalCBOR(map[string]any{"$type": "app.bsky.feed.post", "text": text, "n": int64(i), "createdAt": "2026-12-01T00:00:00.000Z"})
		if err != nil {
			t.Fatal(err)
		}
		c, err := recordCID(raw)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, repo.Record{RKey: syntax.RecordKey("3k" + string(rune('a'+i)) + "aaaaaaaaaa"), CID: c, Value: raw})
	}
	type item struct {
		URI   string          `json:"uri"`
		CID   string          `json:"cid"`
		Value json.RawMessage `json:"value"`
	}
	type page struct {
		Cursor  string `json:"cursor,omitempty"`
		Records []item `json:"records"`
	}
	v0, err := cid.Cast(recs[0].CID.Hash())
	if err != nil || v0.Version() != 0 {
		t.Fatal(v0, err)
	}
	odd := append(slices.Clone(recs[:2]), repo.Record{RKey: "a\"b", CID: v0, Value: recs[0].Value})
	const coll = syntax.NSID("app.bsky.feed.post")
	long := strings.Repeat("3k", 40)
	for _, tc := range []struct {
		did    string
		cursor string
		recs   []repo.Record
	}{
		{"did:plc:listrecordsjson", "3kdaaaaaaaaaa", recs},
		{"did:plc:listrecordsjson", "", recs[:1]},
		{"did:plc:listrecordsjson", long, recs},
		{"did:plc:listrecordsjson", "", nil},
		{"did:plc:listrecordsjson", "a\"b", odd},
		{"did:web:\"quoted\"", "", recs[:2]},
	} {
		did := tc.did
		want := page{Cursor: tc.cursor, Records: make([]item, 0, len(tc.recs))}
		for _, r := range tc.recs {
			v, err := recordJSON(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			want.Records = append(want.Records, item{"at://" + did + "/" + coll.String() + "/" + r.RKey.String(), r.CID.String(), v})
		}
		rec := httptest.NewRecorder()
		xrpc.WriteJSON(rec, 200, want)
		// From a buffer of the pool's kind: used before, longer than a page.
		page := newRecordsPage(bytes.Repeat([]byte("x"), 300)[:7], did, coll)
		for _, r := range tc.recs {
			if err := page.add(repo.RawRecord{RKey: []byte(r.RKey), CID: r.CID.Bytes(), Value: r.Value}); err != nil {
				t.Fatal(err)
			}
		}
		got := page.finish(tc.cursor)
		if !bytes.Equal(got, rec.Body.Bytes()) {
			t.Errorf("listRecordsJSON =\n%s\nxrpc.WriteJSON =\n%s", got, rec.Body.Bytes())
		}
	}
}

// TestRecordAnswer: getRecord's hand-written answer is the bytes
// xrpc.WriteJSON made of it (a record of HTML characters and U+2028; a
// CIDv0; a record key that encoding/json escapes, U+2028 and a quote, where
// jsvalue.AppendQuote would not escape the U+2028).
func TestRecordAnswer(t *testing.T) {
	raw, err := atdata.MarshalCBOR(map[string]any{"$type": "app.bsky.feed.post", "text": "<b>&amp;</b> line\u2028sep", "createdAt": "2026-12-01T00:00:00.000Z"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := recordCID(raw)
	if err != nil {
		t.Fatal(err)
	}
	v0, err := cid.Cast(c.Hash())
	if err != nil {
		t.Fatal(err)
	}
	const did, coll = "did:plc:recordanswer", syntax.NSID("app.bsky.feed.post")
	for _, tc := range []struct {
		rkey syntax.RecordKey
		cid  cid.Cid
	}{{"3kaaaaaaaaaaa", c}, {"self", v0}, {"a\u2028\"b", c}} {
		value, err := recordJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		xrpc.WriteJSON(rec, 200, struct {
			URI   string          `json:"uri"`
			CID   string          `json:"cid"`
			Value json.RawMessage `json:"value"`
		}{"at://" + did + "/" + coll.String() + "/" + tc.rkey.String(), tc.cid.String(), value})
		got, err := recordAnswer(did, coll, tc.rkey, tc.cid, raw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, rec.Body.Bytes()) {
			t.Errorf("recordAnswer =\n%s\nxrpc.WriteJSON =\n%s", got, rec.Body.Bytes())
		}
	}
}
