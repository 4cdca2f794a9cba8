package conformance

import "strings"

// Reserved handles: the reference keeps about a thousand first labels
// from users of its own domains (pds/reserved_handles.txt holds the list
// as data). Only the exact first label is reserved, in any case, on every
// service domain.
func handleReserved(r *run) {
	_, email := r.newHandle("alice")
	pw := "alice-password"
	for _, h := range []string{"admin.test", "Support.test", "bsky.example"} {
		r.post("createAccount "+h, nil, "com.atproto.server.createAccount", map[string]any{
			"handle": h, "email": email, "password": pw,
		})
	}
	// A reserved word inside a longer label is an ordinary handle.
	ok, _ := r.newHandle("admin")
	created := r.post("createAccount reserved word as a prefix", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": ok, "email": email, "password": pw,
	})
	r.nameAccount("admin", created.S("did"), ok, email)

	a := r.account("bob")
	r.post("updateHandle reserved", a, "com.atproto.identity.updateHandle", map[string]any{"handle": "pds.test"})
	r.get("resolveHandle reserved", nil, "com.atproto.identity.resolveHandle", "handle", "pds.test")
}

// A handle in another case than the account's: handles are stored lower
// case and compared exactly by the repo methods and the well-known
// endpoint, while resolveHandle and createSession lower-case what they
// are given first, and createAccount and updateHandle store it lowered.
func handleCase(r *run) {
	a := r.account("casey")
	h := a.Handle.String()
	mixed := strings.ToUpper(h[:1]) + h[1:]
	r.n.Name(mixed, "<handle:casey-mixed>")
	r.get("describeRepo mixed", nil, "com.atproto.repo.describeRepo", "repo", mixed)
	r.get("listRecords mixed", nil, "com.atproto.repo.listRecords", "repo", mixed, "collection", "app.bsky.feed.post")
	r.get("getRecord mixed", nil, "com.atproto.repo.getRecord", "repo", mixed, "collection", "app.bsky.feed.post", "rkey", "self")
	r.post("createRecord mixed", a, "com.atproto.repo.createRecord", write(mixed, "app.bsky.feed.post", "", post("x")))
	r.post("deleteRecord mixed", a, "com.atproto.repo.deleteRecord", map[string]any{"repo": mixed, "collection": "app.bsky.feed.post", "rkey": "self"})
	r.post("createRecord lower", a, "com.atproto.repo.createRecord", write(h, "app.bsky.feed.post", "", post("x")))
	r.get("resolveHandle mixed", nil, "com.atproto.identity.resolveHandle", "handle", strings.ToUpper(h))
	r.post("createSession mixed", nil, "com.atproto.server.createSession", map[string]any{"identifier": mixed, "password": a.Password})
	r.plain("well-known atproto-did mixed", r.p.URL(), "/.well-known/atproto-did", "Host", mixed)

	upper, email := r.newHandle("upper")
	upper = strings.ToUpper(upper[:1]) + upper[1:]
	created := r.post("createAccount mixed", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": upper, "email": email, "password": "upper-password",
	})
	r.check("createAccount stores lower case", map[string]any{"handle": created.S("handle") == strings.ToLower(upper)})
	renamed, _ := r.newHandle("casey2")
	r.post("updateHandle mixed", a, "com.atproto.identity.updateHandle", map[string]any{"handle": strings.ToUpper(renamed)})
	r.get("getSession after updateHandle mixed", a, "com.atproto.server.getSession")
}
