package lexval

import (
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// FuzzPrepare: any input is refused or taken without a panic, and a record
// taken reads back (RecordJSON) as JSON that writes the same record.
func FuzzPrepare(f *testing.F) {
	cases := loadJSON[testCases](f, "testdata/cases.json")
	for _, c := range cases.Writes {
		if c.Raw != nil {
			f.Add(c.Collection, *c.Raw)
		} else {
			f.Add(c.Collection, string(c.Record))
		}
	}
	f.Fuzz(func(t *testing.T, collection, record string) {
		nsid, err := syntax.ParseNSID(collection)
		if err != nil {
			return
		}
		rec, err := Prepare(nsid, "3l4b6g6qbvs2a", []byte(record), nil)
		if err != nil {
			return
		}
		out, err := RecordJSON(rec.CBOR)
		if err != nil {
			t.Fatalf("RecordJSON of a prepared record: %v", err)
		}
		again, err := Prepare(nsid, "3l4b6g6qbvs2a", out, nil)
		if err != nil {
			t.Fatalf("RecordJSON output %s refused: %v", out, err)
		}
		if !again.CID.Equals(rec.CID) {
			t.Fatalf("%s reads back as %s", record, out)
		}
	})
}

// FuzzRecordKeySyntax holds the regexp-free checks to indigo's syntax
// package.
func FuzzRecordKeySyntax(f *testing.F) {
	for _, s := range []string{"self", "3l4b6g6qbvs2a", ".", "..", "a/b", "~_:.-", "", "2222222222222", "kl4b6g6qbvs2a", "3L4B6G6QBVS2A", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := syntax.ParseRecordKey(s)
		if got := validRecordKey(s); got != (err == nil) {
			t.Errorf("validRecordKey(%q) = %v, syntax says %v", s, got, err)
		}
		_, err = syntax.ParseTID(s)
		if got := validTID(s); got != (err == nil) {
			t.Errorf("validTID(%q) = %v, syntax says %v", s, got, err)
		}
	})
}
