package pds_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/api/bsky"
	"github.com/bluesky-social/indigo/atproto/syntax"
	lexutil "github.com/bluesky-social/indigo/lex/util"

	"github.com/fakepds/fakepds/pds"
)

// post is an app.bsky.feed.post record as indigo's generated calls take it.
func post(text string) *lexutil.LexiconTypeDecoder {
	return &lexutil.LexiconTypeDecoder{Val: &bsky.FeedPost{Text: text, CreatedAt: "2026-11-30T12:00:00.000Z"}}
}

func TestRecordLifecycle(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "writer.test", "writer@example.com", "pw")
	events := firehose(t, s, "?cursor=4")
	cl := bearer(s, a.AccessJwt)

	created, err := comatproto.RepoCreateRecord(ctx, cl, &comatproto.RepoCreateRecord_Input{
		Repo: a.Did, Collection: "app.bsky.feed.post", Record: post("hello"),
	})
	if err != nil {
		t.Fatal(err)
	}
	uri, err := syntax.ParseATURI(created.Uri)
	if err != nil || uri.Authority().String() != a.Did || uri.Collection() != "app.bsky.feed.post" {
		t.Fatalf("uri %q: %v", created.Uri, err)
	}
	if _, err := syntax.ParseTID(uri.RecordKey().String()); err != nil {
		t.Fatalf("rkey %q is not a TID", uri.RecordKey())
	}
	expectEvents(t, events, "commit:5:"+a.Did)

	got, err := comatproto.RepoGetRecord(ctx, cl, "", "app.bsky.feed.post", "writer.test", uri.RecordKey().String())
	if err != nil || got.Cid == nil || *got.Cid != created.Cid {
		t.Fatalf("getRecord = %+v, %v", got, err)
	}

	// putRecord updates; the same value again is a no-op without a commit.
	rkey := uri.RecordKey().String()
	// indigo's generated putRecord sends "swapRecord": null, which the
	// reference (and so fakepds) reads as "must not exist yet": an update
	// over an existing record is refused. Leave the field out to update.
	_, err = comatproto.RepoPutRecord(ctx, cl, &comatproto.RepoPutRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Rkey: rkey, Record: post("edited")})
	apiErr(t, err, 400, "InvalidSwap")
	putRaw := func(text string) (out comatproto.RepoPutRecord_Output) {
		t.Helper()
		in := map[string]any{"repo": a.Did, "collection": "app.bsky.feed.post", "rkey": rkey,
			"record": map[string]any{"$type": "app.bsky.feed.post", "text": text, "createdAt": "2026-11-30T12:00:00.000Z"}}
		if err := cl.Post(ctx, "com.atproto.repo.putRecord", in, &out); err != nil {
			t.Fatalf("putRecord: %v", err)
		}
		return out
	}
	put := putRaw("edited")
	if put.Commit == nil {
		t.Fatalf("putRecord = %+v", put)
	}
	expectEvents(t, events, "commit:6:"+a.Did)
	again := putRaw("edited")
	if again.Commit != nil || again.Cid != put.Cid {
		t.Fatalf("putRecord of the same value = %+v", again)
	}

	// swapCommit and swapRecord.
	stale := created.Commit.Cid
	_, err = comatproto.RepoCreateRecord(ctx, cl, &comatproto.RepoCreateRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Record: post("x"), SwapCommit: &stale})
	apiErr(t, err, 400, "InvalidSwap")
	_, err = comatproto.RepoDeleteRecord(ctx, cl, &comatproto.RepoDeleteRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Rkey: rkey, SwapRecord: &created.Cid})
	apiErr(t, err, 400, "InvalidSwap")

	// applyWrites: several writes, one commit.
	res, err := comatproto.RepoApplyWrites(ctx, cl, &comatproto.RepoApplyWrites_Input{Repo: a.Did, Writes: []*comatproto.RepoApplyWrites_Input_Writes_Elem{
		{RepoApplyWrites_Create: &comatproto.RepoApplyWrites_Create{Collection: "app.bsky.feed.post", Rkey: ptr("3aaaaaaaaaaa2"), Value: post("one")}},
		{RepoApplyWrites_Create: &comatproto.RepoApplyWrites_Create{Collection: "app.bsky.feed.post", Rkey: ptr("3aaaaaaaaaab2"), Value: post("two")}},
		{RepoApplyWrites_Delete: &comatproto.RepoApplyWrites_Delete{Collection: "app.bsky.feed.post", Rkey: rkey}},
	}})
	if err != nil || len(res.Results) != 3 || res.Commit == nil {
		t.Fatalf("applyWrites = %+v, %v", res, err)
	}
	expectEvents(t, events, "commit:7:"+a.Did)

	list, err := comatproto.RepoListRecords(ctx, cl, "app.bsky.feed.post", "", 10, a.Did, false)
	if err != nil || len(list.Records) != 2 || !strings.HasSuffix(list.Records[0].Uri, "3aaaaaaaaaab2") {
		t.Fatalf("listRecords = %+v, %v", list, err)
	}
	rev, err := comatproto.RepoListRecords(ctx, cl, "app.bsky.feed.post", "", 1, a.Did, true)
	if err != nil || len(rev.Records) != 1 || !strings.HasSuffix(rev.Records[0].Uri, "3aaaaaaaaaaa2") || rev.Cursor == nil {
		t.Fatalf("listRecords reverse = %+v, %v", rev, err)
	}

	// Deleting an absent record is a no-op: no commit.
	del, err := comatproto.RepoDeleteRecord(ctx, cl, &comatproto.RepoDeleteRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Rkey: rkey})
	if err != nil || del.Commit != nil {
		t.Fatalf("deleteRecord of nothing = %+v, %v", del, err)
	}

	_, err = comatproto.RepoGetRecord(ctx, cl, "", "app.bsky.feed.post", a.Did, rkey)
	apiErr(t, err, 400, "RecordNotFound")

	desc, err := comatproto.RepoDescribeRepo(ctx, cl, a.Did)
	if err != nil || desc.Handle != "writer.test" || !desc.HandleIsCorrect || len(desc.Collections) != 1 {
		t.Fatalf("describeRepo = %+v, %v", desc, err)
	}
	_, err = comatproto.RepoDescribeRepo(ctx, cl, "did:plc:nobodyhere")
	apiErr(t, err, 400, "RepoNotFound")

	// Writing someone else's repo.
	b := createAccount(t, s, "otheracct.test", "other@example.com", "pw")
	_, err = comatproto.RepoCreateRecord(ctx, bearer(s, b.AccessJwt), &comatproto.RepoCreateRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Record: post("x")})
	apiErr(t, err, 401, "AuthenticationRequired")
}

func ptr[T any](v T) *T { return &v }

// Eight writers on their own repos and three subscribers, one of which
// reconnects mid-stream with a cursor: every subscriber sees every commit
// exactly once, in seq order, each verified by indigo.
func TestConcurrentWritersAndSubscribers(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	const writers, perWriter = 8, 15
	accts := make([]*comatproto.ServerCreateAccount_Output, writers)
	for i := range accts {
		accts[i] = createAccount(t, s, fmt.Sprintf("w%02d.test", i), fmt.Sprintf("w%d@example.com", i), "pw")
	}
	head := int64(writers * 4)
	total := writers * perWriter
	subs := []<-chan string{firehose(t, s, fmt.Sprintf("?cursor=%d", head)), firehose(t, s, fmt.Sprintf("?cursor=%d", head))}
	var wg sync.WaitGroup
	for i, a := range accts {
		wg.Go(func() {
			cl := bearer(s, a.AccessJwt)
			for j := range perWriter {
				if _, err := comatproto.RepoCreateRecord(ctx, cl, &comatproto.RepoCreateRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Record: post(fmt.Sprintf("%d-%d", i, j))}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// The third subscriber reads half, disconnects, and resumes from the
	// last seq it saw.
	third := firehose3(t, s, head, total)
	wg.Wait()
	for n, sub := range append(subs, third) {
		seen := map[string]bool{}
		for k := range total {
			var e string
			select {
			case e = <-sub:
			case <-time.After(10 * time.Second):
				t.Fatalf("subscriber %d: only %d of %d events", n, k, total)
			}
			var seq int64
			var did string
			if _, err := fmt.Sscanf(strings.ReplaceAll(e, ":", " "), "commit %d did plc %s", &seq, &did); err != nil {
				t.Fatalf("subscriber %d: unexpected %q", n, e)
			}
			if seq != head+int64(k)+1 {
				t.Fatalf("subscriber %d: seq %d at position %d, want %d", n, seq, k, head+int64(k)+1)
			}
			if seen[e] {
				t.Fatalf("subscriber %d: %q twice", n, e)
			}
			seen[e] = true
		}
	}
}

// firehose3 reads half the events from one connection, closes it, and
// reconnects with the cursor of the last one it saw; it relays all of them.
func firehose3(t *testing.T, s *pds.Server, from int64, total int) <-chan string {
	out := make(chan string, total)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	first := firehoseUntil(t, s, from, ctx)
	last := from
	for range total / 2 {
		e := <-first
		out <- e
		fmt.Sscanf(strings.ReplaceAll(e, ":", " "), "commit %d", &last)
	}
	cancel()
	second := firehose(t, s, fmt.Sprintf("?cursor=%d", last))
	go func() {
		for range total - total/2 {
			out <- <-second
		}
	}()
	return out
}

func firehoseUntil(t *testing.T, s *pds.Server, from int64, ctx context.Context) <-chan string {
	sub := firehose(t, s, fmt.Sprintf("?cursor=%d", from))
	out := make(chan string, 1000)
	go func() {
		for {
			select {
			case e := <-sub:
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// A CAR from getRepo loads with indigo, its commit verifies against the key
// in the DID document resolved through the PLC URL, and every listed record
// is in its MST with the same CID.
func TestGetRepoVerifies(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "car.test", "car@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	for i := range 30 {
		if _, err := comatproto.RepoCreateRecord(ctx, cl, &comatproto.RepoCreateRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Record: post(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	_, r := pds.VerifiedRepo(t, s, a.Did)
	list, err := comatproto.RepoListRecords(ctx, cl, "app.bsky.feed.post", "", 100, a.Did, false)
	if err != nil || len(list.Records) != 30 {
		t.Fatalf("listRecords: %d, %v", len(list.Records), err)
	}
	for _, rec := range list.Records {
		u, _ := syntax.ParseATURI(rec.Uri)
		c, err := r.GetRecordCID(ctx, u.Collection(), u.RecordKey())
		if err != nil || c == nil || c.String() != rec.Cid {
			t.Fatalf("%s: in CAR %v (%v), listed %s", rec.Uri, c, err, rec.Cid)
		}
	}
}

// importRepo takes a repo's CAR back: records deleted since the export
// come back, and garbage is refused as the reference refuses it.
func TestImportRepo(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "import.test", "import@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	var refs []*comatproto.RepoCreateRecord_Output
	for i := range 3 {
		out, err := comatproto.RepoCreateRecord(ctx, cl, &comatproto.RepoCreateRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Record: post(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, out)
	}
	car, err := comatproto.SyncGetRepo(ctx, cl, a.Did, "")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := syntax.ParseATURI(refs[0].Uri)
	if _, err := comatproto.RepoDeleteRecord(ctx, cl, &comatproto.RepoDeleteRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Rkey: u.RecordKey().String()}); err != nil {
		t.Fatal(err)
	}
	importCAR := func(body []byte) error {
		return cl.LexDo(ctx, "POST", "application/vnd.ipld.car", "com.atproto.repo.importRepo", nil, bytes.NewReader(body), nil)
	}
	if err := importCAR(car); err != nil {
		t.Fatalf("importRepo: %v", err)
	}
	got, err := comatproto.RepoGetRecord(ctx, cl, "", "app.bsky.feed.post", a.Did, u.RecordKey().String())
	if err != nil || *got.Cid != refs[0].Cid {
		t.Fatalf("record after import: %+v, %v", got, err)
	}
	// Garbage is the reference's 500 (docs/known-differences.md, "Matched
	// although odd").
	apiErr(t, importCAR([]byte("not a car")), 500, "InternalServerError")
}

// Records are validated against the lexicons as the reference's validate
// parameter says.
func TestRecordValidation(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "valid.test", "valid@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	create := func(collection string, record map[string]any, validate *bool) (map[string]any, error) {
		var out map[string]any
		in := map[string]any{"repo": a.Did, "collection": collection, "record": record}
		if validate != nil {
			in["validate"] = *validate
		}
		err := cl.Post(ctx, "com.atproto.repo.createRecord", in, &out)
		return out, err
	}
	out, err := create("app.bsky.feed.post", map[string]any{"text": "ok <&>", "createdAt": "2026-11-30T12:00:00.000Z"}, nil)
	if err != nil || out["validationStatus"] != "valid" {
		t.Fatalf("valid post: %v %v", out, err)
	}
	var got struct {
		Value json.RawMessage `json:"value"`
	}
	rkey := strings.TrimPrefix(out["uri"].(string), "at://"+a.Did+"/app.bsky.feed.post/")
	if err := cl.Get(ctx, "com.atproto.repo.getRecord", map[string]any{"repo": a.Did, "collection": "app.bsky.feed.post", "rkey": rkey}, &got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got.Value), `"ok <&>"`) {
		t.Fatalf("record text not sent back as written: %s", got.Value)
	}
	_, err = create("app.bsky.feed.post", map[string]any{"text": 5, "createdAt": "2026-11-30T12:00:00.000Z"}, nil)
	apiErr(t, err, 400, "InvalidRequest")
	out, err = create("com.example.thing", map[string]any{"anything": true}, nil)
	if err != nil || out["validationStatus"] != "unknown" {
		t.Fatalf("unknown collection, validate unset: %v %v", out, err)
	}
	yes, no := true, false
	_, err = create("com.example.thing", map[string]any{"anything": true}, &yes)
	apiErr(t, err, 400, "InvalidRequest")
	out, err = create("app.bsky.feed.post", map[string]any{"text": 5}, &no)
	if err != nil || out["validationStatus"] != nil {
		t.Fatalf("validate=false: %v %v", out, err)
	}
	_, err = create("app.bsky.feed.post", map[string]any{"$type": "app.bsky.feed.like", "text": "x"}, nil)
	apiErr(t, err, 400, "InvalidRequest")
}
