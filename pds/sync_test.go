package pds_test

import (
	"bytes"
	"fmt"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
)

func TestSyncEndpoints(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	anon := atclient.NewAPIClient(s.URL())
	a := createAccount(t, s, "syncacct.test", "sync@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	created, err := comatproto.RepoCreateRecord(ctx, cl, &comatproto.RepoCreateRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Record: post("proof")})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := comatproto.SyncGetLatestCommit(ctx, anon, a.Did)
	if err != nil || latest.Cid != created.Commit.Cid || latest.Rev != created.Commit.Rev {
		t.Fatalf("getLatestCommit = %+v, %v (want %+v)", latest, err, created.Commit)
	}

	// The proof CAR of a record loads with indigo and holds the record.
	uri, _ := syntax.ParseATURI(created.Uri)
	proof, err := comatproto.SyncGetRecord(ctx, anon, "app.bsky.feed.post", a.Did, uri.RecordKey().String())
	if err != nil {
		t.Fatal(err)
	}
	commit, r, err := indigorepo.LoadRepoFromCAR(ctx, bytes.NewReader(proof))
	if err != nil {
		t.Fatalf("proof CAR: %v", err)
	}
	if commit.Rev != latest.Rev {
		t.Fatalf("proof commit rev %s, want %s", commit.Rev, latest.Rev)
	}
	if c, err := r.GetRecordCID(ctx, "app.bsky.feed.post", uri.RecordKey()); err != nil || c.String() != created.Cid {
		t.Fatalf("record in proof: %v %v", c, err)
	}

	blocks, err := comatproto.SyncGetBlocks(ctx, anon, []string{created.Cid, latest.Cid}, a.Did)
	if err != nil || len(blocks) == 0 {
		t.Fatalf("getBlocks: %d bytes, %v", len(blocks), err)
	}
	_, err = comatproto.SyncGetBlocks(ctx, anon, []string{"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"}, a.Did)
	apiErr(t, err, 400, "InvalidRequest")

	st, err := comatproto.SyncGetRepoStatus(ctx, anon, a.Did)
	if err != nil || !st.Active || st.Rev == nil || *st.Rev != latest.Rev {
		t.Fatalf("getRepoStatus = %+v, %v", st, err)
	}
	_, err = comatproto.SyncGetRepoStatus(ctx, anon, "did:plc:nobodyhere")
	apiErr(t, err, 400, "RepoNotFound")
	_, err = comatproto.SyncGetRepo(ctx, anon, "did:plc:nobodyhere", "")
	apiErr(t, err, 400, "RepoNotFound")

	// A deactivated repo is hidden from others, not from its owner.
	if err := comatproto.ServerDeactivateAccount(ctx, cl, &comatproto.ServerDeactivateAccount_Input{}); err != nil {
		t.Fatal(err)
	}
	_, err = comatproto.SyncGetRepo(ctx, anon, a.Did, "")
	apiErr(t, err, 400, "RepoDeactivated")
	if _, err := comatproto.SyncGetRepo(ctx, cl, a.Did, ""); err != nil {
		t.Fatalf("owner reading its deactivated repo: %v", err)
	}
	st, _ = comatproto.SyncGetRepoStatus(ctx, anon, a.Did)
	if st.Active || st.Status == nil || *st.Status != "deactivated" || st.Rev != nil {
		t.Fatalf("getRepoStatus of a deactivated repo = %+v", st)
	}
}

func TestListRepos(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	var dids []string
	for i := range 5 {
		dids = append(dids, createAccount(t, s, fmt.Sprintf("list%d.test", i), fmt.Sprintf("l%d@example.com", i), "pw").Did)
	}
	anon := atclient.NewAPIClient(s.URL())
	var got []string
	cursor := ""
	for range 10 {
		page, err := comatproto.SyncListRepos(ctx, anon, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Repos {
			if r.Head == "" || r.Rev == "" || r.Active == nil || !*r.Active {
				t.Fatalf("repo %+v", r)
			}
			got = append(got, r.Did)
		}
		if page.Cursor == nil || len(page.Repos) == 0 {
			break
		}
		cursor = *page.Cursor
	}
	if fmt.Sprint(got) != fmt.Sprint(dids) {
		t.Fatalf("listRepos paged %v, want %v", got, dids)
	}
}

// getRepo's since is a TID, checked (by the mux, from the lexicon) as the
// reference checks it (messages from npm 0.5.35), before the repo is looked
// up: it once answered 200 with the whole repo.
func TestGetRepoSinceMustBeTID(t *testing.T) {
	s := start(t, pds.Config{})
	a := createAccount(t, s, "sincecheck.test", "since@example.com", "pw")
	for _, did := range []string{a.Did, "did:plc:nobodyhere"} {
		for _, since := range []string{"garbage", "3k2a"} {
			wantErr(t, call(t, s, "GET", "/xrpc/com.atproto.sync.getRepo?did="+did+"&since="+since, nil), 400, "InvalidRequest",
				fmt.Sprintf("Invalid com.atproto.sync.getRepo params: Invalid TID string (got %q)", since))
		}
	}
	if r := call(t, s, "GET", "/xrpc/com.atproto.sync.getRepo?did="+a.Did+"&since=3k2aaaaaaaaaa", nil); r.Status != 200 {
		t.Fatalf("getRepo with a TID since: %d %s", r.Status, r.Body)
	}
}
