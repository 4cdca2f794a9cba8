package pds

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// TestListRecordsJSON: the hand-written listRecords answer is the bytes
// xrpc.WriteJSON makes of the same page (HTML characters, U+2028 and
// non-ASCII text in values, with and without a cursor, no records).
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
	const did, coll = "did:plc:listrecordsjson", syntax.NSID("app.bsky.feed.post")
	for _, tc := range []struct {
		cursor string
		recs   []repo.Record
	}{{"3kdaaaaaaaaaa", recs}, {"", recs[:1]}, {"", nil}} {
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
		got, err := listRecordsJSON(did, coll, tc.cursor, tc.recs)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, rec.Body.Bytes()) {
			t.Errorf("listRecordsJSON =\n%s\nxrpc.WriteJSON =\n%s", got, rec.Body.Bytes())
		}
	}
}
