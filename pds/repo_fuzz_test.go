package pds_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"testing"

	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	gocar "github.com/ipld/go-car"
)

// Seeds name the fuzz server's accounts by placeholder ($alice, $bob: see
// fuzzPDS.expand) and its seeded records by rkey.
const (
	seedPost = `{"$type":"app.bsky.feed.post","text":"hi","createdAt":"2026-11-30T12:00:00.000Z"}`
	seedCID  = "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
)

// fuzzBody is the target of one procedure's JSON input: any body, sent
// with any of the credentials of fuzzPDS.auth, holds check's invariant.
func fuzzBody(f *testing.F, nsid string, seeds ...string) {
	p := newFuzzPDS(f)
	for _, s := range seeds {
		f.Add(uint8(0), s)
	}
	for k := range uint8(authKinds) {
		f.Add(k, seeds[0])
	}
	f.Add(uint8(0), "")
	f.Add(uint8(0), "{")
	f.Add(uint8(0), "[]")
	f.Add(uint8(0), "null")
	f.Fuzz(func(t *testing.T, auth uint8, body string) {
		p.check(t, fuzzCall{NSID: nsid, Auth: p.auth(auth), Body: p.expand(body), NoBody: body == ""})
	})
}

func FuzzCreateRecord(f *testing.F) {
	fuzzBody(f, "com.atproto.repo.createRecord",
		`{"repo":"$alice","collection":"app.bsky.feed.post","record":`+seedPost+`}`,
		`{"repo":"alice.test","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2c","validate":true,"record":`+seedPost+`}`,
		`{"repo":"$alice","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2a","record":`+seedPost+`}`,
		`{"repo":"$alice","collection":"com.example.thing","validate":false,"record":{"$type":"com.example.thing","n":1}}`,
		`{"repo":"$alice","collection":"app.bsky.feed.post","swapCommit":"`+seedCID+`","record":`+seedPost+`}`,
		`{"repo":"$bob","collection":"app.bsky.feed.post","record":`+seedPost+`}`,
		`{"repo":"$alice","collection":"app.bsky.feed.post","record":{"$type":"app.bsky.feed.post","text":"big","createdAt":"2026-11-30T12:00:00.000Z","n":9007199254740992}}`,
		`{"repo":"$alice","collection":"not a nsid","record":{}}`,
	)
}

func FuzzPutRecord(f *testing.F) {
	fuzzBody(f, "com.atproto.repo.putRecord",
		`{"repo":"$alice","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2a","record":`+seedPost+`}`,
		`{"repo":"$alice","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2z","swapRecord":null,"record":`+seedPost+`}`,
		`{"repo":"$alice","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2a","swapRecord":"`+seedCID+`","record":`+seedPost+`}`,
		`{"repo":"$alice","collection":"app.bsky.actor.profile","rkey":"self","swapCommit":"`+seedCID+`","record":{"$type":"app.bsky.actor.profile","displayName":"A"}}`,
		`{"repo":"$alice","collection":"app.bsky.feed.post","rkey":"..","record":`+seedPost+`}`,
	)
}

func FuzzDeleteRecord(f *testing.F) {
	fuzzBody(f, "com.atproto.repo.deleteRecord",
		`{"repo":"$alice","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2a"}`,
		`{"repo":"$alice","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2z"}`,
		`{"repo":"$alice","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2b","swapRecord":"`+seedCID+`"}`,
		`{"repo":"$alice","collection":"app.bsky.actor.profile","rkey":"self","swapCommit":"`+seedCID+`"}`,
		`{"repo":"$bob","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2a"}`,
	)
}

func FuzzApplyWrites(f *testing.F) {
	fuzzBody(f, "com.atproto.repo.applyWrites",
		`{"repo":"$alice","writes":[{"$type":"com.atproto.repo.applyWrites#create","collection":"app.bsky.feed.post","value":`+seedPost+`}]}`,
		`{"repo":"$alice","validate":false,"writes":[`+
			`{"$type":"com.atproto.repo.applyWrites#create","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2c","value":`+seedPost+`},`+
			`{"$type":"com.atproto.repo.applyWrites#update","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2a","value":`+seedPost+`},`+
			`{"$type":"com.atproto.repo.applyWrites#delete","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2b"}]}`,
		`{"repo":"$alice","swapCommit":"`+seedCID+`","writes":[{"$type":"com.atproto.repo.applyWrites#delete","collection":"app.bsky.actor.profile","rkey":"self"}]}`,
		`{"repo":"$alice","writes":[{"$type":"com.atproto.repo.applyWrites#delete","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2z"}]}`,
		`{"repo":"$alice","writes":[{"$type":"com.atproto.repo.applyWrites#create","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2d","value":`+seedPost+`},{"$type":"com.atproto.repo.applyWrites#create","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2d","value":`+seedPost+`}]}`,
		`{"repo":"$alice","writes":[{"$type":"com.atproto.repo.applyWrites#nope"}]}`,
		`{"repo":"$alice","writes":[]}`,
	)
}

// FuzzRecordValue writes any record value (pds/lexval's cases as seeds)
// with putRecord: besides check's invariant, a record taken reads back
// from getRecord under the CID the write answered, and that JSON written
// again is the same record (no new commit).
func FuzzRecordValue(f *testing.F) {
	p := newFuzzPDS(f)
	b, err := os.ReadFile("lexval/testdata/cases.json")
	if err != nil {
		f.Fatal(err)
	}
	var cases struct {
		Writes []struct {
			Collection, Rkey string
			Record           json.RawMessage
			Raw              *string
		}
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases.Writes {
		rec := string(c.Record)
		if c.Raw != nil {
			rec = *c.Raw
		}
		f.Add(c.Collection, c.Rkey, rec)
	}
	f.Fuzz(func(t *testing.T, collection, rkey, record string) {
		if !json.Valid([]byte(record)) {
			record = jsonString(record) // still a value: a string record
		}
		body := `{"repo":"` + p.alice.DID + `","collection":` + jsonString(collection) + `,"rkey":` + jsonString(rkey) + `,"record":` + record + `}`
		put := fuzzCall{NSID: "com.atproto.repo.putRecord", Auth: "Bearer " + p.alice.Access, Body: body}
		r, _ := p.check(t, put)
		if r.Status != 200 {
			return
		}
		var out struct{ CID string }
		if err := json.Unmarshal(r.Body, &out); err != nil {
			t.Fatalf("%s: %s", put, r.Body)
		}
		get := fuzzCall{NSID: "com.atproto.repo.getRecord", Query: "repo=" + p.alice.DID + "&collection=" + url.QueryEscape(collection) + "&rkey=" + url.QueryEscape(rkey)}
		g, _ := p.check(t, get)
		var got struct {
			CID   string
			Value json.RawMessage
		}
		if g.Status != 200 || json.Unmarshal(g.Body, &got) != nil || got.CID != out.CID {
			t.Fatalf("%s answered %s; getRecord: %d %s", put, r.Body, g.Status, g.Body)
		}
		again := put
		again.Body = `{"repo":"` + p.alice.DID + `","collection":` + jsonString(collection) + `,"rkey":` + jsonString(rkey) + `,"record":` + string(got.Value) + `}`
		a, _ := p.check(t, again)
		var out2 struct {
			CID    string
			Commit *json.RawMessage
		}
		if a.Status != 200 || json.Unmarshal(a.Body, &out2) != nil || out2.CID != out.CID || out2.Commit != nil {
			t.Fatalf("record %s read back as %s, which writes as %d %s (first write %s)", record, got.Value, a.Status, a.Body, out.CID)
		}
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzImportRepo sends importRepo a CAR: an input's own bytes, or (when it
// has none) the fuzz server's own export of alice's repo, with bytes
// flipped at an offset and cut short; so the mutations reach past the
// DID check whatever DIDs the fuzz process's server minted. Besides check's
// invariant: a CAR taken becomes the head, and the repo then exports as a
// whole, verified repo (every block hashes to its CID, the MST holds).
func FuzzImportRepo(f *testing.F) {
	p := newFuzzPDS(f)
	base := p.mustCall(f, fuzzCall{NSID: "com.atproto.sync.getRepo", Query: "did=" + p.alice.DID}).Body
	f.Add([]byte(nil), uint32(0), []byte(nil), uint32(0)) // alice's repo as it is
	for _, at := range []uint32{0, 1, 10, 40, 60, 100, 200, 400, 800} {
		f.Add([]byte(nil), at, []byte{0xff}, uint32(0))
		f.Add([]byte(nil), uint32(0), []byte(nil), at)
	}
	f.Add([]byte(nil), uint32(len(base)-5), []byte{1, 2, 3, 4, 5, 6, 7, 8}, uint32(0))
	// A byte of a record, of an MST key, of the commit's DID: each block
	// then no longer hashes to its CID.
	for _, in := range []string{"post 1", "feed.post/3l4b6g6qbvs2b", p.alice.DID} {
		if i := bytes.Index(base, []byte(in)); i >= 0 {
			f.Add([]byte(nil), uint32(i+2), []byte{1}, uint32(0))
		}
	}
	f.Add([]byte("not a car"), uint32(0), []byte(nil), uint32(0))
	f.Add([]byte{0x0a, 0xa1, 0x65, 0x72, 0x6f, 0x6f, 0x74, 0x73, 0x80}, uint32(0), []byte(nil), uint32(0))
	f.Add(base, uint32(0), []byte(nil), uint32(0)) // in a fuzz worker, another server's alice
	f.Fuzz(func(t *testing.T, raw []byte, at uint32, xor []byte, cut uint32) {
		car := bytes.Clone(raw)
		if len(car) == 0 {
			car = bytes.Clone(base)
		}
		for i, x := range xor {
			car[(int(at)+i)%len(car)] ^= x
		}
		if cut > 0 && int(cut) < len(car) {
			car = car[:cut]
		}
		r, _ := p.check(t, fuzzCall{NSID: "com.atproto.repo.importRepo", Auth: "Bearer " + p.alice.Access,
			ContentType: "application/vnd.ipld.car", Body: string(car)})
		if r.Status == 200 {
			verifyImported(t, p, car)
		}
	})
}

// verifyImported: after importRepo took car, alice's head is car's root
// and her repo exports as a CAR whose every block hashes to its CID and
// whose MST indigo loads and verifies.
func verifyImported(t *testing.T, p *fuzzPDS, car []byte) {
	t.Helper()
	hdr, err := gocar.ReadHeader(bufio.NewReader(bytes.NewReader(car)))
	if err != nil || len(hdr.Roots) != 1 {
		t.Fatalf("importRepo took a CAR whose header does not read: %v", err)
	}
	l := p.mustCall(t, fuzzCall{NSID: "com.atproto.sync.getLatestCommit", Query: "did=" + p.alice.DID})
	var latest struct{ CID string }
	if err := json.Unmarshal(l.Body, &latest); err != nil || latest.CID != hdr.Roots[0].String() {
		t.Fatalf("importRepo took a CAR with root %s, head is %s", hdr.Roots[0], l.Body)
	}
	out := p.mustCall(t, fuzzCall{NSID: "com.atproto.sync.getRepo", Query: "did=" + p.alice.DID}).Body
	cr, err := gocar.NewCarReader(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("export after import: %v", err)
	}
	for {
		blk, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("export after import: %v", err)
		}
		if sum, err := blk.Cid().Prefix().Sum(blk.RawData()); err != nil || !sum.Equals(blk.Cid()) {
			t.Fatalf("export after import: block %s holds bytes hashing to %s", blk.Cid(), sum)
		}
	}
	_, rp, err := indigorepo.LoadRepoFromCAR(t.Context(), bytes.NewReader(out))
	if err != nil {
		t.Fatalf("export after import: %v", err)
	}
	if err := rp.MST.Verify(); err != nil {
		t.Fatalf("export after import: MST: %v", err)
	}
}
