package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/bluesky-social/indigo/atproto/atdata"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/fakepds/fakepds/harness"
)

// Repo methods and their error cases.

// fixedTime keeps records identical across runs and backends, so their
// CIDs can be checked against a local dag-cbor encoding.
const fixedTime = "2024-01-01T00:00:00.000Z"

func post(text string) map[string]any {
	return map[string]any{"$type": "app.bsky.feed.post", "text": text, "createdAt": fixedTime}
}

// localCID is the CID of record as dag-cbor, computed here with indigo.
func localCID(record map[string]any) string {
	b, err := json.Marshal(record)
	if err != nil {
		return "error: " + err.Error()
	}
	obj, err := atdata.UnmarshalJSON(b)
	if err != nil {
		return "error: " + err.Error()
	}
	enc, err := atdata.MarshalCBOR(obj)
	if err != nil {
		return "error: " + err.Error()
	}
	c, err := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256).Sum(enc)
	if err != nil {
		return "error: " + err.Error()
	}
	return c.String()
}

func write(repo, collection, rkey string, record any, extra ...any) map[string]any {
	in := map[string]any{"repo": repo, "collection": collection, "record": record}
	if rkey != "" {
		in["rkey"] = rkey
	}
	for i := 0; i+1 < len(extra); i += 2 {
		in[extra[i].(string)] = extra[i+1]
	}
	return in
}

func repoCreateGet(r *run) {
	a := r.account("alice")
	b := r.account("bob")
	did := a.DID.String()
	rec := post("hello conformance")

	created := r.post("createRecord", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "3kconfaaaaaa2", rec))
	r.check("record CID is its dag-cbor", map[string]any{"equal": created.S("cid") == localCID(rec)})
	r.post("createRecord existing rkey", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "3kconfaaaaaa2", rec))
	r.post("createRecord generated rkey", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", post("second")))
	r.post("createRecord repo by handle", a, "com.atproto.repo.createRecord", write(a.Handle.String(), "app.bsky.feed.post", "", post("by handle")))
	r.post("createRecord unknown lexicon", a, "com.atproto.repo.createRecord", write(did, "com.example.thing", "self", map[string]any{"$type": "com.example.thing", "n": 1}))
	r.post("createRecord unknown lexicon validate", a, "com.atproto.repo.createRecord", write(did, "com.example.thing", "two", map[string]any{"$type": "com.example.thing"}, "validate", true))
	r.post("createRecord invalid record", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", map[string]any{"$type": "app.bsky.feed.post", "text": 42, "createdAt": fixedTime}))
	r.post("createRecord invalid record validate false", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", map[string]any{"$type": "app.bsky.feed.post", "text": 42, "createdAt": fixedTime}, "validate", false))
	r.post("createRecord missing required field", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", map[string]any{"$type": "app.bsky.feed.post", "text": "no date"}))
	r.post("createRecord type mismatch", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", map[string]any{"$type": "app.bsky.feed.like", "createdAt": fixedTime}))
	r.post("createRecord no type", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", map[string]any{"text": "x", "createdAt": fixedTime}))
	r.post("createRecord invalid collection", a, "com.atproto.repo.createRecord", write(did, "not-an-nsid", "", post("x")))
	r.post("createRecord invalid rkey", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "bad rkey!", post("x")))
	r.post("createRecord swapCommit wrong", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", post("x"), "swapCommit", created.S("commit.cid")))
	r.post("createRecord other's repo", a, "com.atproto.repo.createRecord", write(b.DID.String(), "app.bsky.feed.post", "", post("x")))
	r.post("createRecord unknown repo", a, "com.atproto.repo.createRecord", write("did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", "app.bsky.feed.post", "", post("x")))
	r.post("createRecord no auth", nil, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", post("x")))
	r.post("createRecord missing record", a, "com.atproto.repo.createRecord", map[string]any{"repo": did, "collection": "app.bsky.feed.post"})

	uri := created.S("uri")
	parts := strings.Split(uri, "/")
	rkey := parts[len(parts)-1]
	r.get("getRecord", nil, "com.atproto.repo.getRecord", "repo", did, "collection", "app.bsky.feed.post", "rkey", rkey)
	r.get("getRecord by handle", nil, "com.atproto.repo.getRecord", "repo", a.Handle.String(), "collection", "app.bsky.feed.post", "rkey", rkey)
	r.get("getRecord with cid", nil, "com.atproto.repo.getRecord", "repo", did, "collection", "app.bsky.feed.post", "rkey", rkey, "cid", created.S("cid"))
	r.get("getRecord with other cid", nil, "com.atproto.repo.getRecord", "repo", did, "collection", "app.bsky.feed.post", "rkey", rkey, "cid", localCID(post("other")))
	r.get("getRecord missing", nil, "com.atproto.repo.getRecord", "repo", did, "collection", "app.bsky.feed.post", "rkey", "3kconfnothere")
	r.get("getRecord unknown collection", nil, "com.atproto.repo.getRecord", "repo", did, "collection", "com.example.none", "rkey", "self")
	r.get("getRecord missing params", nil, "com.atproto.repo.getRecord", "repo", did)
	r.get("getRecord invalid repo", nil, "com.atproto.repo.getRecord", "repo", "not a repo", "collection", "app.bsky.feed.post", "rkey", rkey)
}

func repoPutDelete(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	const coll = "app.bsky.actor.profile"
	prof := map[string]any{"$type": coll, "displayName": "Alice"}
	put := r.post("putRecord create", a, "com.atproto.repo.putRecord", write(did, coll, "self", prof))
	r.check("record CID is its dag-cbor", map[string]any{"equal": put.S("cid") == localCID(prof)})
	prof2 := map[string]any{"$type": coll, "displayName": "Alice 2"}
	upd := r.post("putRecord update", a, "com.atproto.repo.putRecord", write(did, coll, "self", prof2))
	r.post("putRecord same content", a, "com.atproto.repo.putRecord", write(did, coll, "self", prof2))
	r.post("putRecord swapRecord wrong", a, "com.atproto.repo.putRecord", write(did, coll, "self", prof, "swapRecord", put.S("cid")))
	r.post("putRecord swapRecord right", a, "com.atproto.repo.putRecord", write(did, coll, "self", prof, "swapRecord", upd.S("cid")))
	r.post("putRecord swapCommit wrong", a, "com.atproto.repo.putRecord", write(did, coll, "self", prof2, "swapCommit", put.S("commit.cid")))
	r.post("putRecord swapCommit wrong same content", a, "com.atproto.repo.putRecord", write(did, coll, "self", prof, "swapCommit", put.S("commit.cid")))
	r.post("putRecord missing rkey", a, "com.atproto.repo.putRecord", write(did, coll, "", prof2))
	r.post("putRecord invalid record", a, "com.atproto.repo.putRecord", write(did, coll, "self", map[string]any{"$type": coll, "displayName": 7}))
	r.post("putRecord no auth", nil, "com.atproto.repo.putRecord", write(did, coll, "self", prof2))
	r.get("getRecord after puts", nil, "com.atproto.repo.getRecord", "repo", did, "collection", coll, "rkey", "self")

	del := func(rkey string, extra ...any) map[string]any {
		in := map[string]any{"repo": did, "collection": coll, "rkey": rkey}
		for i := 0; i+1 < len(extra); i += 2 {
			in[extra[i].(string)] = extra[i+1]
		}
		return in
	}
	cur := r.get("getRecord before delete", nil, "com.atproto.repo.getRecord", "repo", did, "collection", coll, "rkey", "self")
	r.post("deleteRecord swapRecord wrong", a, "com.atproto.repo.deleteRecord", del("self", "swapRecord", localCID(post("not it"))))
	r.post("deleteRecord swapCommit wrong", a, "com.atproto.repo.deleteRecord", del("self", "swapCommit", put.S("commit.cid")))
	r.post("deleteRecord", a, "com.atproto.repo.deleteRecord", del("self", "swapRecord", cur.S("cid")))
	r.post("deleteRecord again", a, "com.atproto.repo.deleteRecord", del("self"))
	r.post("deleteRecord never existed", a, "com.atproto.repo.deleteRecord", del("nothing"))
	r.post("deleteRecord never existed swapRecord", a, "com.atproto.repo.deleteRecord", del("nothing", "swapRecord", cur.S("cid")))
	r.get("getRecord deleted", nil, "com.atproto.repo.getRecord", "repo", did, "collection", coll, "rkey", "self")
	r.post("deleteRecord no auth", nil, "com.atproto.repo.deleteRecord", del("self"))

	// swapRecord null means "only if there is no record yet". Last, so
	// that a difference here changes nothing else.
	const posts = "app.bsky.feed.post"
	r.post("putRecord swapRecord null on new", a, "com.atproto.repo.putRecord", write(did, posts, "3kconfaaaaaa3", post("new"), "swapRecord", nil))
	r.post("putRecord swapRecord null on existing", a, "com.atproto.repo.putRecord", write(did, posts, "3kconfaaaaaa3", post("replaced"), "swapRecord", nil))
	r.get("getRecord after swapRecord null", nil, "com.atproto.repo.getRecord", "repo", did, "collection", posts, "rkey", "3kconfaaaaaa3")
}

func repoApplyWrites(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	const coll = "app.bsky.feed.post"
	first := r.post("applyWrites creates", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": coll, "rkey": "3kconfaaaaaa2", "value": post("one")},
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": coll, "rkey": "3kconfaaaaaa3", "value": post("two")},
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": coll, "value": post("generated rkey")},
	}})
	r.post("applyWrites mixed", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "swapCommit": first.S("commit.cid"), "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#update", "collection": coll, "rkey": "3kconfaaaaaa2", "value": post("one, edited")},
		map[string]any{"$type": "com.atproto.repo.applyWrites#delete", "collection": coll, "rkey": "3kconfaaaaaa3"},
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": "app.bsky.actor.profile", "rkey": "self", "value": map[string]any{"$type": "app.bsky.actor.profile"}},
	}})
	r.post("applyWrites swapCommit wrong", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "swapCommit": first.S("commit.cid"), "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": coll, "value": post("x")},
	}})
	r.post("applyWrites update missing", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#update", "collection": coll, "rkey": "3kconfnothere", "value": post("x")},
	}})
	r.post("applyWrites delete missing", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#delete", "collection": coll, "rkey": "3kconfnothere"},
	}})
	r.post("applyWrites create existing", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": coll, "rkey": "3kconfaaaaaa2", "value": post("x")},
	}})
	r.post("applyWrites invalid record", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": coll, "value": map[string]any{"$type": coll, "text": 1}},
	}})
	r.post("applyWrites unknown write type", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#upsert", "collection": coll, "value": post("x")},
	}})
	var many []any
	for i := range 201 {
		many = append(many, map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": coll, "value": post(fmt.Sprint(i))})
	}
	r.post("applyWrites too many", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": many})
	r.post("applyWrites no auth", nil, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": []any{}})
	r.get("listRecords after", nil, "com.atproto.repo.listRecords", "repo", did, "collection", coll)
	// Last: an empty applyWrites makes a commit on the reference.
	r.post("applyWrites empty", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": []any{}})
}

func repoListDescribe(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	const coll = "app.bsky.feed.post"
	for _, rkey := range []string{"3kconfaaaaaa2", "3kconfaaaaaa3", "3kconfaaaaaa4"} {
		r.post("create "+rkey, a, "com.atproto.repo.createRecord", write(did, coll, rkey, post(rkey)))
	}
	a.Like(r.t, harness.Ref{URI: syntax.ATURI("at://" + did + "/" + coll + "/3kconfaaaaaa2"), CID: localCID(post("3kconfaaaaaa2"))})

	r.get("listRecords", nil, "com.atproto.repo.listRecords", "repo", did, "collection", coll)
	page := r.get("listRecords limit 2", nil, "com.atproto.repo.listRecords", "repo", did, "collection", coll, "limit", "2")
	r.get("listRecords next page", nil, "com.atproto.repo.listRecords", "repo", did, "collection", coll, "limit", "2", "cursor", page.S("cursor"))
	r.get("listRecords reverse", nil, "com.atproto.repo.listRecords", "repo", did, "collection", coll, "reverse", "true")
	r.get("listRecords by handle", nil, "com.atproto.repo.listRecords", "repo", a.Handle.String(), "collection", coll, "limit", "1")
	r.get("listRecords empty collection", nil, "com.atproto.repo.listRecords", "repo", did, "collection", "com.example.none")
	r.get("listRecords limit 0", nil, "com.atproto.repo.listRecords", "repo", did, "collection", coll, "limit", "0")
	r.get("listRecords limit 101", nil, "com.atproto.repo.listRecords", "repo", did, "collection", coll, "limit", "101")
	r.get("listRecords limit not a number", nil, "com.atproto.repo.listRecords", "repo", did, "collection", coll, "limit", "many")
	r.get("listRecords unknown repo", nil, "com.atproto.repo.listRecords", "repo", "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", "collection", coll)
	r.get("listRecords missing collection", nil, "com.atproto.repo.listRecords", "repo", did)

	r.get("describeRepo", nil, "com.atproto.repo.describeRepo", "repo", did)
	r.get("describeRepo by handle", nil, "com.atproto.repo.describeRepo", "repo", a.Handle.String())
	r.get("describeRepo unknown", nil, "com.atproto.repo.describeRepo", "repo", "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")
	r.get("describeRepo unknown handle", nil, "com.atproto.repo.describeRepo", "repo", "nobody-at-all.test")
	r.get("describeRepo invalid", nil, "com.atproto.repo.describeRepo", "repo", "not a repo")
}

func preferences(r *run) {
	a := r.account("alice")
	r.get("getPreferences empty", a, "app.bsky.actor.getPreferences")
	r.post("putPreferences", a, "app.bsky.actor.putPreferences", map[string]any{"preferences": []any{
		map[string]any{"$type": "app.bsky.actor.defs#adultContentPref", "enabled": false},
		map[string]any{"$type": "app.bsky.actor.defs#savedFeedsPrefV2", "items": []any{}},
	}})
	r.get("getPreferences", a, "app.bsky.actor.getPreferences")
	r.post("putPreferences no type", a, "app.bsky.actor.putPreferences", map[string]any{"preferences": []any{map[string]any{"enabled": true}}})
	r.post("putPreferences other namespace", a, "app.bsky.actor.putPreferences", map[string]any{"preferences": []any{map[string]any{"$type": "com.example.pref"}}})
	r.post("putPreferences missing", a, "app.bsky.actor.putPreferences", map[string]any{})
	r.get("getPreferences no auth", nil, "app.bsky.actor.getPreferences")
}

// importRepo of another account's CAR: the reference checks neither the
// commit's DID nor its signature, so it imports (records under the
// caller's DID, the other account's commit as the head).
func repoImport(r *run) {
	a, b := r.account("alice"), r.account("bob")
	r.post("createRecord alice", a, "com.atproto.repo.createRecord", write(a.DID.String(), "app.bsky.feed.post", "", post("alice's")))
	theirs := r.post("createRecord bob", b, "com.atproto.repo.createRecord", write(b.DID.String(), "app.bsky.feed.post", "", post("bob's")))
	car := r.get("getRepo bob", nil, "com.atproto.sync.getRepo", "did", b.DID.String())
	r.post("importRepo bob's repo as alice", a, "com.atproto.repo.importRepo", raw{car.Raw, "application/vnd.ipld.car"})
	r.get("listRecords alice after import", nil, "com.atproto.repo.listRecords", "repo", a.DID.String(), "collection", "app.bsky.feed.post")
	latest := r.get("getLatestCommit alice after import", nil, "com.atproto.sync.getLatestCommit", "did", a.DID.String())
	r.check("alice's head is bob's commit", map[string]any{"same": latest.S("cid") == theirs.S("commit.cid")})
	r.post("createRecord alice after import", a, "com.atproto.repo.createRecord", write(a.DID.String(), "app.bsky.feed.post", "", post("alice's again")))
	// Read, not recorded: the tree of two records under random TIDs has
	// one node or two.
	did := "unreadable"
	if hr, err := http.Get(r.p.URL() + "/xrpc/com.atproto.sync.getRepo?did=" + a.DID.String()); err == nil {
		commit, _, err := indigorepo.LoadCommitFromCAR(r.t.Context(), hr.Body)
		hr.Body.Close()
		if did = "unreadable: " + fmt.Sprint(err); err == nil {
			did = commit.DID
		}
	}
	r.check("alice's next commit", map[string]any{"did": did})
	r.post("importRepo not a CAR", a, "com.atproto.repo.importRepo", raw{[]byte("not a car"), "application/vnd.ipld.car"})
}
