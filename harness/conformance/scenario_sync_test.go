package conformance

import (
	"bytes"
	"strings"
)

// Sync endpoints and blobs.

func syncEndpoints(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	const coll = "app.bsky.feed.post"
	first := r.post("createRecord", a, "com.atproto.repo.createRecord", write(did, coll, "3kconfaaaaaa2", post("one")))
	r.post("createRecord second", a, "com.atproto.repo.createRecord", write(did, coll, "3kconfaaaaaa3", post("two")))

	latest := r.get("getLatestCommit", nil, "com.atproto.sync.getLatestCommit", "did", did)
	r.get("getLatestCommit unknown", nil, "com.atproto.sync.getLatestCommit", "did", "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")
	r.get("getRepo", nil, "com.atproto.sync.getRepo", "did", did)
	r.get("getRepo since", nil, "com.atproto.sync.getRepo", "did", did, "since", first.S("commit.rev"))
	r.get("getRepo unknown", nil, "com.atproto.sync.getRepo", "did", "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")
	r.get("getRepo invalid did", nil, "com.atproto.sync.getRepo", "did", "alice.test")
	r.get("getRecord proof", nil, "com.atproto.sync.getRecord", "did", did, "collection", coll, "rkey", "3kconfaaaaaa2")
	r.get("getRecord proof of absence", nil, "com.atproto.sync.getRecord", "did", did, "collection", coll, "rkey", "3kconfnothere")
	r.get("getBlocks", nil, "com.atproto.sync.getBlocks", "did", did, "cids", latest.S("cid"), "cids", first.S("cid"))
	r.get("getBlocks unknown cid", nil, "com.atproto.sync.getBlocks", "did", did, "cids", localCID(post("never written")))
	r.get("getRepoStatus", nil, "com.atproto.sync.getRepoStatus", "did", did)
	r.get("getRepoStatus unknown", nil, "com.atproto.sync.getRepoStatus", "did", "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")
	r.listReposEntry("listRepos entry", did)
	r.get("listRepos limit 0", nil, "com.atproto.sync.listRepos", "limit", "0")
}

// listReposEntry pages through listRepos and records only the entry of
// did (a shared PDS has every other scenario's repos too) and the shape
// of the pages.
func (r *run) listReposEntry(step, did string) {
	r.t.Helper()
	cursor := ""
	var found any
	var status int
	var ctype string
	for range 1000 {
		params := []string{"limit", "1000"}
		if cursor != "" {
			params = append(params, "cursor", cursor)
		}
		re := r.getUnrecorded("com.atproto.sync.listRepos", params...)
		status, ctype = re.Status, re.Type
		if re.Status != 200 {
			break
		}
		repos, _ := re.At("repos").([]any)
		for _, e := range repos {
			if m, ok := e.(map[string]any); ok && m["did"] == did {
				found = m
			}
		}
		cursor = re.S("cursor")
		if found != nil || cursor == "" || len(repos) == 0 {
			break
		}
	}
	r.addStep(rawStep{name: step, call: "GET com.atproto.sync.listRepos", status: status, ctype: ctype, body: map[string]any{"entry": found}})
}

// getUnrecorded is a query whose answer the scenario digests itself.
func (r *run) getUnrecorded(nsid string, params ...string) *resp {
	r.t.Helper()
	n := len(r.steps)
	re := r.get("(unrecorded "+nsid+" "+strings.Join(params, " ")+")", nil, nsid, params...)
	delete(r.names, r.steps[n].name)
	r.steps = r.steps[:n]
	return re
}

// pngBytes is a 1x1 PNG.
var pngBytes = []byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
	0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
	0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
	0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
}

func blobs(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	up := r.post("uploadBlob png", a, "com.atproto.repo.uploadBlob", raw{pngBytes, "image/png"})
	r.post("uploadBlob text", a, "com.atproto.repo.uploadBlob", raw{[]byte("just some text"), "text/plain"})
	r.post("uploadBlob no content type", a, "com.atproto.repo.uploadBlob", raw{[]byte("untyped bytes"), ""})
	r.post("uploadBlob empty", a, "com.atproto.repo.uploadBlob", raw{nil, "image/png"})
	r.post("uploadBlob wrong declared type", a, "com.atproto.repo.uploadBlob", raw{pngBytes, "image/jpeg"})
	r.post("uploadBlob no auth", nil, "com.atproto.repo.uploadBlob", raw{pngBytes, "image/png"})
	blobCID := up.S("blob.ref.$link")

	r.get("listBlobs before use", nil, "com.atproto.sync.listBlobs", "did", did)
	r.get("listMissingBlobs", a, "com.atproto.repo.listMissingBlobs")
	r.get("getBlob before use", nil, "com.atproto.sync.getBlob", "did", did, "cid", blobCID)

	r.post("putRecord profile with avatar", a, "com.atproto.repo.putRecord", write(did, "app.bsky.actor.profile", "self", map[string]any{
		"$type": "app.bsky.actor.profile", "displayName": "Alice", "avatar": up.At("blob"),
	}))
	r.get("listBlobs", nil, "com.atproto.sync.listBlobs", "did", did)
	got := r.get("getBlob", nil, "com.atproto.sync.getBlob", "did", did, "cid", blobCID)
	r.check("getBlob bytes", map[string]any{"equal": bytes.Equal(got.Raw, pngBytes)})
	r.get("getBlob missing", nil, "com.atproto.sync.getBlob", "did", did, "cid", localCID(post("not a blob")))
	r.get("getBlob unknown repo", nil, "com.atproto.sync.getBlob", "did", "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", "cid", blobCID)
	r.get("getBlob invalid cid", nil, "com.atproto.sync.getBlob", "did", did, "cid", "nope")
	r.get("listBlobs unknown repo", nil, "com.atproto.sync.listBlobs", "did", "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")
	r.post("createRecord with unknown blob", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", map[string]any{
		"$type": "app.bsky.feed.post", "text": "img", "createdAt": fixedTime,
		"embed": map[string]any{"$type": "app.bsky.embed.images", "images": []any{map[string]any{
			"alt": "", "image": map[string]any{"$type": "blob", "ref": map[string]any{"$link": "bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy"}, "mimeType": "image/png", "size": 10},
		}}},
	}))
	r.post("deleteRecord profile", a, "com.atproto.repo.deleteRecord", map[string]any{"repo": did, "collection": "app.bsky.actor.profile", "rkey": "self"})
	r.get("listBlobs after delete", nil, "com.atproto.sync.listBlobs", "did", did)
}
