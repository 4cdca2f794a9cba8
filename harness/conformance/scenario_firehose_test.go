package conformance

// The firehose: event types, the grouping of account creation, commit ops,
// cursor replay and FutureCursor.

func firehoseAccountCreation(r *run) {
	fh := r.subscribe(nil)
	handle, email := r.newHandle("alice")
	created := r.post("createAccount", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": handle, "email": email, "password": "alice-password",
	})
	r.nameAccount("alice", created.S("did"), handle, email)
	r.events("events", fh)
}

func firehoseCommits(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	const coll = "app.bsky.feed.post"
	fh := r.subscribe(nil)
	r.post("createRecord", a, "com.atproto.repo.createRecord", write(did, coll, "3kconfaaaaaa2", post("one")))
	r.post("createRecord second", a, "com.atproto.repo.createRecord", write(did, coll, "3kconfaaaaaa3", post("two")))
	r.post("putRecord update", a, "com.atproto.repo.putRecord", write(did, coll, "3kconfaaaaaa2", post("one, edited")))
	r.post("deleteRecord", a, "com.atproto.repo.deleteRecord", map[string]any{"repo": did, "collection": coll, "rkey": "3kconfaaaaaa3"})
	r.post("applyWrites", a, "com.atproto.repo.applyWrites", map[string]any{"repo": did, "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": coll, "rkey": "3kconfaaaaaa4", "value": post("three")},
		map[string]any{"$type": "com.atproto.repo.applyWrites#update", "collection": coll, "rkey": "3kconfaaaaaa2", "value": post("one, again")},
		map[string]any{"$type": "com.atproto.repo.applyWrites#delete", "collection": coll, "rkey": "3kconfaaaaaa2"},
	}})
	r.post("createRecord failing", a, "com.atproto.repo.createRecord", write(did, coll, "3kconfaaaaaa4", post("exists")))
	r.post("putPreferences", a, "app.bsky.actor.putPreferences", map[string]any{"preferences": []any{}})
	r.events("events", fh)
}

// firehoseEmptyCommit is alone so that a missing commit does not shift
// the numbering of every CID after it.
func firehoseEmptyCommit(r *run) {
	a := r.account("alice")
	fh := r.subscribe(nil)
	r.post("applyWrites empty", a, "com.atproto.repo.applyWrites", map[string]any{"repo": a.DID.String(), "writes": []any{}})
	r.events("events", fh)
}

func firehoseReplay(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	const coll = "app.bsky.feed.post"
	live := r.subscribe(nil)
	r.post("createRecord", a, "com.atproto.repo.createRecord", write(did, coll, "3kconfaaaaaa2", post("one")))
	r.post("createRecord second", a, "com.atproto.repo.createRecord", write(did, coll, "3kconfaaaaaa3", post("two")))
	frames := r.events("live", live)
	if len(frames) == 0 {
		r.t.Fatal("no live events to replay")
	}
	first, last := frames[0].seq(), frames[len(frames)-1].seq()

	from := first - 1
	replay := r.subscribe(&from)
	r.events("replay from before the first", replay)

	from = last
	after := r.subscribe(&from)
	r.post("createRecord after cursor", a, "com.atproto.repo.createRecord", write(did, coll, "3kconfaaaaaa4", post("three")))
	r.events("replay from the last", after)

	future := last + 1_000_000
	r.firstFrames("future cursor", r.subscribe(&future), 1)

	// A cursor that is not a number, through plain HTTP (no upgrade).
	r.plain("cursor not a number", r.p.URL(), "/xrpc/com.atproto.sync.subscribeRepos?cursor=abc")
	r.plain("subscribeRepos without upgrade", r.p.URL(), "/xrpc/com.atproto.sync.subscribeRepos?cursor=1")
}

// xrpcMisc is how the XRPC layer answers what no method handles.
func xrpcMisc(r *run) {
	a := r.account("alice")
	r.get("unknown method", nil, "com.example.unknownMethod")
	r.get("unknown method with auth", a, "com.example.unknownMethod")
	r.post("query as POST", nil, "com.atproto.server.describeServer", map[string]any{})
	r.get("procedure as GET", nil, "com.atproto.server.createSession")
	r.plain("not XRPC", r.p.URL(), "/nothing-here")
	r.plain("robots.txt", r.p.URL(), "/robots.txt")
	r.plain("root", r.p.URL(), "/")
}
