package conformance

// Identity, account lifecycle, app passwords, admin and email requests.

func identity(r *run) {
	a := r.account("alice")
	b := r.account("bob")
	fh := r.subscribe(nil)
	r.get("resolveHandle", nil, "com.atproto.identity.resolveHandle", "handle", a.Handle.String())
	r.get("resolveHandle unknown", nil, "com.atproto.identity.resolveHandle", "handle", "nobody-at-all.test")
	r.get("resolveHandle invalid", nil, "com.atproto.identity.resolveHandle", "handle", "not a handle")
	r.get("resolveHandle missing", nil, "com.atproto.identity.resolveHandle")
	r.plain("well-known atproto-did", r.p.URL(), "/.well-known/atproto-did", "Host", a.Handle.String())
	r.plain("well-known atproto-did unknown", r.p.URL(), "/.well-known/atproto-did", "Host", "nobody-at-all.test")

	newHandle, _ := r.newHandle("alice2")
	r.post("updateHandle", a, "com.atproto.identity.updateHandle", map[string]any{"handle": newHandle})
	r.get("resolveHandle new", nil, "com.atproto.identity.resolveHandle", "handle", newHandle)
	r.get("resolveHandle old", nil, "com.atproto.identity.resolveHandle", "handle", a.Handle.String())
	r.post("updateHandle same", a, "com.atproto.identity.updateHandle", map[string]any{"handle": newHandle})
	r.post("updateHandle taken", a, "com.atproto.identity.updateHandle", map[string]any{"handle": b.Handle.String()})
	r.post("updateHandle invalid", a, "com.atproto.identity.updateHandle", map[string]any{"handle": "not a handle"})
	r.post("updateHandle unsupported domain", a, "com.atproto.identity.updateHandle", map[string]any{"handle": "alice.example.com"})
	r.post("updateHandle no auth", nil, "com.atproto.identity.updateHandle", map[string]any{"handle": newHandle})
	r.get("getSession after updateHandle", a, "com.atproto.server.getSession")
	r.get("describeRepo after updateHandle", nil, "com.atproto.repo.describeRepo", "repo", a.DID.String())

	r.get("getRecommendedDidCredentials", a, "com.atproto.identity.getRecommendedDidCredentials")
	r.post("requestPlcOperationSignature", a, "com.atproto.identity.requestPlcOperationSignature", nil)
	r.post("signPlcOperation bad token", a, "com.atproto.identity.signPlcOperation", map[string]any{"token": "nope-nope"})
	r.post("signPlcOperation no token", a, "com.atproto.identity.signPlcOperation", map[string]any{})
	r.post("submitPlcOperation garbage", a, "com.atproto.identity.submitPlcOperation", map[string]any{"operation": map[string]any{"type": "plc_operation"}})
	r.events("events", fh)
}

func accountLifecycle(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	fh := r.subscribe(nil)
	r.get("checkAccountStatus", a, "com.atproto.server.checkAccountStatus")
	r.post("deactivateAccount", a, "com.atproto.server.deactivateAccount", map[string]any{})
	r.get("checkAccountStatus deactivated", a, "com.atproto.server.checkAccountStatus")
	r.get("getSession deactivated", a, "com.atproto.server.getSession")
	r.post("createSession deactivated", nil, "com.atproto.server.createSession", map[string]any{"identifier": a.Handle.String(), "password": a.Password})
	r.post("createRecord deactivated", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", post("x")))
	r.get("describeRepo deactivated", nil, "com.atproto.repo.describeRepo", "repo", did)
	r.get("getRepo deactivated", nil, "com.atproto.sync.getRepo", "did", did)
	r.get("getRepoStatus deactivated", nil, "com.atproto.sync.getRepoStatus", "did", did)
	r.get("getLatestCommit deactivated", nil, "com.atproto.sync.getLatestCommit", "did", did)
	r.get("resolveHandle deactivated", nil, "com.atproto.identity.resolveHandle", "handle", a.Handle.String())
	r.post("activateAccount", a, "com.atproto.server.activateAccount", nil)
	r.post("activateAccount again", a, "com.atproto.server.activateAccount", nil)
	r.get("getRepoStatus active", nil, "com.atproto.sync.getRepoStatus", "did", did)
	r.post("deactivateAccount no auth", nil, "com.atproto.server.deactivateAccount", map[string]any{})
	r.events("events", fh)
}

func appPasswords(r *run) {
	a := r.account("alice")
	ci := r.post("createAppPassword", a, "com.atproto.server.createAppPassword", map[string]any{"name": "ci"})
	r.post("createAppPassword privileged", a, "com.atproto.server.createAppPassword", map[string]any{"name": "admin tool", "privileged": true})
	r.post("createAppPassword same name", a, "com.atproto.server.createAppPassword", map[string]any{"name": "ci"})
	r.post("createAppPassword no name", a, "com.atproto.server.createAppPassword", map[string]any{})
	r.get("listAppPasswords", a, "com.atproto.server.listAppPasswords")
	login := r.post("createSession with app password", nil, "com.atproto.server.createSession", map[string]any{
		"identifier": a.Handle.String(), "password": ci.S("password"),
	})
	tok := bearer(login.S("accessJwt"))
	r.get("getSession app password", tok, "com.atproto.server.getSession")
	r.post("createAppPassword from app password", tok, "com.atproto.server.createAppPassword", map[string]any{"name": "nested"})
	r.get("listAppPasswords from app password", tok, "com.atproto.server.listAppPasswords")
	r.post("createRecord from app password", tok, "com.atproto.repo.createRecord", write(a.DID.String(), "app.bsky.feed.post", "", post("x")))
	r.post("deactivateAccount from app password", tok, "com.atproto.server.deactivateAccount", map[string]any{})
	r.post("revokeAppPassword", a, "com.atproto.server.revokeAppPassword", map[string]any{"name": "ci"})
	r.post("revokeAppPassword unknown", a, "com.atproto.server.revokeAppPassword", map[string]any{"name": "never"})
	r.post("createSession revoked app password", nil, "com.atproto.server.createSession", map[string]any{
		"identifier": a.Handle.String(), "password": ci.S("password"),
	})
	r.get("getSession revoked app password", tok, "com.atproto.server.getSession")
	r.post("refreshSession revoked app password", bearer(login.S("refreshJwt")), "com.atproto.server.refreshSession", nil)
	r.get("listAppPasswords after revoke", a, "com.atproto.server.listAppPasswords")
}

func emailRequests(r *run) {
	a := r.account("alice")
	r.post("requestEmailConfirmation", a, "com.atproto.server.requestEmailConfirmation", nil)
	r.post("confirmEmail bad token", a, "com.atproto.server.confirmEmail", map[string]any{"email": a.Email, "token": "AAAAA-BBBBB"})
	r.post("confirmEmail wrong email", a, "com.atproto.server.confirmEmail", map[string]any{"email": "someone@example.com", "token": "AAAAA-BBBBB"})
	r.post("requestEmailUpdate", a, "com.atproto.server.requestEmailUpdate", nil)
	r.post("updateEmail unconfirmed", a, "com.atproto.server.updateEmail", map[string]any{"email": "new-" + a.Email})
	r.post("updateEmail invalid", a, "com.atproto.server.updateEmail", map[string]any{"email": "not-an-email"})
	r.post("requestPasswordReset", nil, "com.atproto.server.requestPasswordReset", map[string]any{"email": a.Email})
	r.post("requestPasswordReset unknown", nil, "com.atproto.server.requestPasswordReset", map[string]any{"email": "nobody@example.com"})
	r.post("resetPassword bad token", nil, "com.atproto.server.resetPassword", map[string]any{"token": "AAAAA-BBBBB", "password": "x"})
	r.post("requestAccountDelete", a, "com.atproto.server.requestAccountDelete", nil)
	r.post("deleteAccount bad token", nil, "com.atproto.server.deleteAccount", map[string]any{"did": a.DID.String(), "password": a.Password, "token": "AAAAA-BBBBB"})
	r.post("deleteAccount wrong password", nil, "com.atproto.server.deleteAccount", map[string]any{"did": a.DID.String(), "password": "wrong", "token": "AAAAA-BBBBB"})
	r.get("getSession", a, "com.atproto.server.getSession")
}

func adminTakedown(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	ref := r.post("createRecord", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "3kconfaaaaaa2", post("soon gone")))
	fh := r.subscribe(nil)

	r.get("getAccountInfo", admin, "com.atproto.admin.getAccountInfo", "did", did)
	r.get("getAccountInfo no auth", nil, "com.atproto.admin.getAccountInfo", "did", did)
	r.get("getAccountInfo wrong password", basic{"admin", "wrong"}, "com.atproto.admin.getAccountInfo", "did", did)
	r.get("getAccountInfo as user", a, "com.atproto.admin.getAccountInfo", "did", did)
	r.get("getAccountInfo unknown", admin, "com.atproto.admin.getAccountInfo", "did", "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")
	r.get("getAccountInfos", admin, "com.atproto.admin.getAccountInfos", "dids", did, "dids", "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")

	repoRef := map[string]any{"$type": "com.atproto.admin.defs#repoRef", "did": did}
	takedown := map[string]any{"applied": true, "ref": "conformance-takedown"}
	r.get("getSubjectStatus before", admin, "com.atproto.admin.getSubjectStatus", "did", did)
	r.post("takedown record", admin, "com.atproto.admin.updateSubjectStatus", map[string]any{
		"subject":  map[string]any{"$type": "com.atproto.repo.strongRef", "uri": ref.S("uri"), "cid": ref.S("cid")},
		"takedown": takedown,
	})
	r.get("getSubjectStatus record", admin, "com.atproto.admin.getSubjectStatus", "uri", ref.S("uri"))
	r.get("getRecord taken down", nil, "com.atproto.repo.getRecord", "repo", did, "collection", "app.bsky.feed.post", "rkey", "3kconfaaaaaa2")
	r.get("listRecords with record taken down", nil, "com.atproto.repo.listRecords", "repo", did, "collection", "app.bsky.feed.post")

	r.post("takedown repo", admin, "com.atproto.admin.updateSubjectStatus", map[string]any{"subject": repoRef, "takedown": takedown})
	r.post("takedown repo as user", a, "com.atproto.admin.updateSubjectStatus", map[string]any{"subject": repoRef, "takedown": takedown})
	r.get("getSubjectStatus repo", admin, "com.atproto.admin.getSubjectStatus", "did", did)
	r.get("getAccountInfo taken down", admin, "com.atproto.admin.getAccountInfo", "did", did)
	r.post("createSession taken down", nil, "com.atproto.server.createSession", map[string]any{"identifier": a.Handle.String(), "password": a.Password})
	r.get("getSession taken down", a, "com.atproto.server.getSession")
	r.post("createRecord taken down", a, "com.atproto.repo.createRecord", write(did, "app.bsky.feed.post", "", post("x")))
	r.get("describeRepo taken down", nil, "com.atproto.repo.describeRepo", "repo", did)
	r.get("getRepo taken down", nil, "com.atproto.sync.getRepo", "did", did)
	r.get("getRepoStatus taken down", nil, "com.atproto.sync.getRepoStatus", "did", did)
	r.get("getLatestCommit taken down", nil, "com.atproto.sync.getLatestCommit", "did", did)
	r.get("resolveHandle taken down", nil, "com.atproto.identity.resolveHandle", "handle", a.Handle.String())

	r.post("reverse takedown", admin, "com.atproto.admin.updateSubjectStatus", map[string]any{"subject": repoRef, "takedown": map[string]any{"applied": false}})
	r.get("getRepoStatus restored", nil, "com.atproto.sync.getRepoStatus", "did", did)
	r.post("createSession restored", nil, "com.atproto.server.createSession", map[string]any{"identifier": a.Handle.String(), "password": a.Password})
	r.events("events", fh)
}

func adminAccounts(r *run) {
	a := r.account("alice")
	did := a.DID.String()
	fh := r.subscribe(nil)
	newHandle, newEmail := r.newHandle("alice2")
	r.post("updateAccountHandle", admin, "com.atproto.admin.updateAccountHandle", map[string]any{"did": did, "handle": newHandle})
	r.post("updateAccountEmail", admin, "com.atproto.admin.updateAccountEmail", map[string]any{"account": did, "email": newEmail})
	r.post("updateAccountPassword", admin, "com.atproto.admin.updateAccountPassword", map[string]any{"did": did, "password": "new-password"})
	r.post("createSession new password", nil, "com.atproto.server.createSession", map[string]any{"identifier": newHandle, "password": "new-password"})
	r.post("updateAccountHandle no auth", nil, "com.atproto.admin.updateAccountHandle", map[string]any{"did": did, "handle": newHandle})
	r.post("updateAccountHandle unknown", admin, "com.atproto.admin.updateAccountHandle", map[string]any{"did": "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", "handle": "x-" + newHandle})
	// Account deletion removes the account's earlier events from the
	// sequencer (on the reference and on fakepds), so a live subscriber
	// may or may not have been sent them: capture them before, and the
	// deletion alone; a second deletion sequences another #account event
	// and removes the first.
	r.events("events", fh)
	del := r.subscribe(nil)
	r.post("deleteAccount", admin, "com.atproto.admin.deleteAccount", map[string]any{"did": did})
	r.events("deletion events", del)
	r.post("deleteAccount again", admin, "com.atproto.admin.deleteAccount", map[string]any{"did": did})
	r.get("describeRepo deleted", nil, "com.atproto.repo.describeRepo", "repo", did)
	r.get("getRepoStatus deleted", nil, "com.atproto.sync.getRepoStatus", "did", did)
	r.get("getAccountInfo deleted", admin, "com.atproto.admin.getAccountInfo", "did", did)
	r.post("createSession deleted", nil, "com.atproto.server.createSession", map[string]any{"identifier": newHandle, "password": "new-password"})
}
