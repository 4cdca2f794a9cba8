package conformance

// Server, account and session flows.

func serverDescribe(r *run) {
	r.get("health", nil, "_health")
	r.get("describeServer", nil, "com.atproto.server.describeServer")
	r.get("describeServer with auth", admin, "com.atproto.server.describeServer")
}

func accountCreate(r *run) {
	handle, email := r.newHandle("alice")
	pw := "alice-password"
	created := r.post("createAccount", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": handle, "email": email, "password": pw,
	})
	r.nameAccount("alice", created.S("did"), handle, email)

	r.post("handle taken", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": handle, "email": "other-" + email, "password": pw,
	})
	other, otherEmail := r.newHandle("bob")
	r.post("email taken", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": other, "email": email, "password": pw,
	})
	r.post("handle missing", nil, "com.atproto.server.createAccount", map[string]any{
		"email": otherEmail, "password": pw,
	})
	r.post("handle invalid", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": "not a handle", "email": otherEmail, "password": pw,
	})
	r.post("handle too short", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": "ab.test", "email": otherEmail, "password": pw,
	})
	r.post("handle too long", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": "abcdefghijklmnopqrstuvwxyz.test", "email": otherEmail, "password": pw,
	})
	r.post("handle domain unsupported", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": "someone-else.example.com", "email": otherEmail, "password": pw,
	})
	r.post("email invalid", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": other, "email": "not-an-email", "password": pw,
	})
	r.post("malformed JSON", nil, "com.atproto.server.createAccount", "{not json")
	r.post("wrong body type", nil, "com.atproto.server.createAccount", map[string]any{
		"handle": 42, "email": otherEmail, "password": pw,
	})

	r.get("getSession", bearer(created.S("accessJwt")), "com.atproto.server.getSession")
	r.get("resolveHandle", nil, "com.atproto.identity.resolveHandle", "handle", handle)
	r.get("describeRepo", nil, "com.atproto.repo.describeRepo", "repo", created.S("did"))
	r.get("checkAccountStatus", bearer(created.S("accessJwt")), "com.atproto.server.checkAccountStatus")
}

func session(r *run) {
	a := r.account("alice")
	login := r.post("createSession with handle", nil, "com.atproto.server.createSession", map[string]any{
		"identifier": a.Handle.String(), "password": a.Password,
	})
	r.post("createSession with email", nil, "com.atproto.server.createSession", map[string]any{
		"identifier": a.Email, "password": a.Password,
	})
	r.post("createSession with DID", nil, "com.atproto.server.createSession", map[string]any{
		"identifier": a.DID.String(), "password": a.Password,
	})
	r.post("createSession wrong password", nil, "com.atproto.server.createSession", map[string]any{
		"identifier": a.Handle.String(), "password": "wrong",
	})
	r.post("createSession unknown account", nil, "com.atproto.server.createSession", map[string]any{
		"identifier": "nobody-at-all.test", "password": "wrong",
	})
	r.post("createSession missing password", nil, "com.atproto.server.createSession", map[string]any{
		"identifier": a.Handle.String(),
	})
	access, refresh := login.S("accessJwt"), login.S("refreshJwt")

	r.get("getSession", bearer(access), "com.atproto.server.getSession")
	r.get("getSession no auth", nil, "com.atproto.server.getSession")
	r.get("getSession garbage token", bearer("garbage"), "com.atproto.server.getSession")
	r.get("getSession with refresh token", bearer(refresh), "com.atproto.server.getSession")
	r.get("getSession basic auth", basic{"admin", "wrong"}, "com.atproto.server.getSession")
	r.get("getSession admin", admin, "com.atproto.server.getSession")

	r.post("refreshSession with access token", bearer(access), "com.atproto.server.refreshSession", nil)
	refreshed := r.post("refreshSession", bearer(refresh), "com.atproto.server.refreshSession", nil)
	r.post("refreshSession again with the old token", bearer(refresh), "com.atproto.server.refreshSession", nil)
	r.get("getSession with the new access token", bearer(refreshed.S("accessJwt")), "com.atproto.server.getSession")

	r.post("deleteSession with access token", bearer(refreshed.S("accessJwt")), "com.atproto.server.deleteSession", nil)
	r.post("deleteSession", bearer(refreshed.S("refreshJwt")), "com.atproto.server.deleteSession", nil)
	r.post("refreshSession after deleteSession", bearer(refreshed.S("refreshJwt")), "com.atproto.server.refreshSession", nil)
	r.get("getSession after deleteSession", bearer(refreshed.S("accessJwt")), "com.atproto.server.getSession")
}
