package conformance

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
