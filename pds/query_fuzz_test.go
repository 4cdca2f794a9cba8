package pds_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var diffReference = flag.String("diff-reference", "",
	"FuzzQueryParams: send every input to the npm reference PDS too, and append each new kind of difference in status or error name to this file")

// queries are the query methods FuzzQueryParams calls, each with the
// parameters real calls send (cursor, limit, rkey, collection, DID,
// handle, since among them).
var queries = []struct {
	nsid  string
	seeds []string
}{
	{"com.atproto.repo.getRecord", []string{"repo=$alice&collection=app.bsky.feed.post&rkey=3l4b6g6qbvs2a",
		"repo=alice.test&collection=app.bsky.actor.profile&rkey=self&cid=" + seedCID, "repo=$alice&collection=app.bsky.feed.post&rkey=..",
		"repo=did:plc:aaaaaaaaaaaaaaaaaaaaaaaa&collection=app.bsky.feed.post&rkey=x"}},
	{"com.atproto.repo.listRecords", []string{"repo=$alice&collection=app.bsky.feed.post&limit=1&cursor=3l4b6g6qbvs2a",
		"repo=alice.test&collection=app.bsky.feed.post&reverse=true&limit=100", "repo=$alice&collection=app.bsky.feed.post&limit=0",
		"repo=$alice&collection=app.bsky.feed.post&limit=101&reverse=maybe", "repo=$alice&collection=bad&rkeyStart=a&rkeyEnd=z"}},
	{"com.atproto.repo.describeRepo", []string{"repo=$alice", "repo=ALICE.test", "repo=nobody.test"}},
	{"com.atproto.sync.getRepo", []string{"did=$alice", "did=$alice&since=3l4b6g6qbvs2a", "did=$alice&since=garbage", "did=alice.test"}},
	{"com.atproto.sync.getLatestCommit", []string{"did=$alice", "did=did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"}},
	{"com.atproto.sync.getRecord", []string{"did=$alice&collection=app.bsky.feed.post&rkey=3l4b6g6qbvs2a", "did=$alice&collection=app.bsky.feed.post&rkey=3l4b6g6qbvs2z"}},
	{"com.atproto.sync.getBlocks", []string{"did=$alice&cids=" + seedCID, "did=$alice&cids=" + seedCID + "&cids=bad", "did=$alice"}},
	{"com.atproto.sync.listRepos", []string{"limit=1", "limit=1&cursor=$alice", "limit=1001", "cursor=x"}},
	{"com.atproto.sync.getRepoStatus", []string{"did=$alice", "did=bad"}},
	{"com.atproto.sync.listBlobs", []string{"did=$alice&limit=10&since=3l4b6g6qbvs2a&cursor=" + seedCID, "did=$alice&limit=1001"}},
	{"com.atproto.sync.getBlob", []string{"did=$alice&cid=" + seedCID, "did=$alice&cid=bad"}},
	{"com.atproto.repo.listMissingBlobs", []string{"limit=10", "limit=10&cursor=" + seedCID, "limit=x"}},
	{"com.atproto.identity.resolveHandle", []string{"handle=alice.test", "handle=ALICE.TEST", "handle=nobody.test", "handle=bad handle"}},
	{"com.atproto.server.getServiceAuth", []string{"aud=did:web:example.com", "aud=$bob&lxm=com.atproto.repo.createRecord&exp=9999999999", "aud=x&lxm=bad"}},
	{"com.atproto.server.getSession", []string{""}},
	{"com.atproto.server.checkAccountStatus", []string{""}},
	{"com.atproto.server.listAppPasswords", []string{""}},
	{"com.atproto.server.getAccountInviteCodes", []string{"includeUsed=true&createAvailable=false", "includeUsed=maybe"}},
	{"com.atproto.identity.getRecommendedDidCredentials", []string{""}},
	{"app.bsky.actor.getPreferences", []string{""}},
	{"com.atproto.admin.getAccountInfo", []string{"did=$alice", "did=bad"}},
	{"com.atproto.admin.getAccountInfos", []string{"dids=$alice&dids=$bob", "dids=bad"}},
	{"com.atproto.admin.getSubjectStatus", []string{"did=$alice", "uri=at://$alice/app.bsky.feed.post/3l4b6g6qbvs2a", "did=$alice&blob=" + seedCID, "uri=at://alice.test/app.bsky.feed.post/3l4b6g6qbvs2a"}},
	{"com.atproto.admin.getInviteCodes", []string{"sort=recent&limit=10", "sort=usage&cursor=x", "sort=odd&limit=501"}},
}

// FuzzQueryParams calls the query methods with any raw query string: a
// success or a named XRPC error, and (a query) no change to stored data
// either way.
func FuzzQueryParams(f *testing.F) {
	p := newFuzzPDS(f)
	addTableSeeds(f, len(queries), func(i int) (string, []string) { return queries[i].nsid, queries[i].seeds })
	var ref *fuzzPDS
	if *diffReference != "" {
		ref = &fuzzPDS{logs: &errorLog{}, remote: startReference(f, f.Cleanup)}
		ref.open(f)
	}
	seen := map[string]bool{}
	f.Fuzz(func(t *testing.T, method, auth uint8, query string) {
		q := queries[int(method)%len(queries)]
		r, ok := p.checkRead(t, fuzzCall{NSID: q.nsid, Auth: p.auth(auth), Query: p.expand(query)})
		if *diffReference == "" || !ok || strings.IndexFunc(query, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			return // Node's HTTP parser refuses a URL with such bytes before the PDS sees it
		}
		rr, _ := ref.do(t, fuzzCall{NSID: q.nsid, Auth: ref.auth(auth), Query: ref.expand(query)})
		ours, theirs := answerOf(r), answerOf(rr)
		if key := q.nsid + " " + ours + " / " + theirs; ours != theirs && !seen[key] {
			seen[key] = true
			out, err := os.OpenFile(*diffReference, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(out, "%s auth=%d ?%s\n  fakepds:   %s %s\n  reference: %s %s\n", q.nsid, auth%authKinds, query, ours, r.Body, theirs, rr.Body)
			out.Close()
		}
	})
}

// answerOf is a reply's status and XRPC error name.
func answerOf(r fuzzReply) string {
	if r.Status < 400 {
		return fmt.Sprint(r.Status)
	}
	var e struct{ Error string }
	_ = json.Unmarshal(r.Body, &e)
	return fmt.Sprint(r.Status, " ", e.Error)
}
