package pds_test

import (
	"slices"
	"testing"
)

func FuzzCreateAccount(f *testing.F) {
	fuzzBody(f, "com.atproto.server.createAccount",
		`{"handle":"carol.test","email":"carol@example.com","password":"carol-password"}`,
		`{"handle":"alice.test","email":"new@example.com","password":"pw"}`,
		`{"handle":"dave.test","email":"alice@example.com","password":"pw"}`,
		`{"handle":"Erin.TEST","email":"erin@example.com","password":"pw","inviteCode":"x"}`,
		`{"handle":"frank.test","email":"frank@example.com","password":"pw","did":"$alice"}`,
		`{"handle":"gina.test","email":"gina@example.com","password":"pw","did":"did:plc:aaaaaaaaaaaaaaaaaaaaaaaa","plcOp":{"type":"plc_operation"}}`,
		`{"handle":"hank.test","email":"hank@example.com","recoveryKey":"did:key:zQ3shXjHeiBuRCKmM36cuYnm7YEMzhGnCmCyW92sRJ9pribSF"}`,
		`{"handle":"x.test","email":"not an email","password":"pw"}`,
		`{"handle":"ivy.example.com","email":"ivy@example.com","password":"pw"}`,
		`{"handle":1,"email":"a@example.com"}`,
	)
}

func FuzzCreateSession(f *testing.F) {
	fuzzBody(f, "com.atproto.server.createSession",
		`{"identifier":"alice.test","password":"alice-password"}`,
		`{"identifier":"$alice","password":"alice-password"}`,
		`{"identifier":"alice@example.com","password":"alice-password","authFactorToken":"123"}`,
		`{"identifier":"ALICE.TEST","password":"wrong"}`,
		`{"identifier":"nobody.test","password":"pw","allowTakendown":true}`,
		`{"identifier":"","password":""}`,
		`{"identifier":"alice.test"}`,
	)
}

func FuzzUpdateHandle(f *testing.F) {
	fuzzBody(f, "com.atproto.identity.updateHandle",
		`{"handle":"alice2.test"}`,
		`{"handle":"alice.test"}`,
		`{"handle":"bob.test"}`,
		`{"handle":"ALICE3.Test"}`,
		`{"handle":"alice.example.com"}`,
		`{"handle":"$alice"}`,
		`{"handle":"ab.test"}`,
		`{"handle":"-x-.test"}`,
		`{"handle":null}`,
	)
}

// procedure is a procedure of FuzzProcedures. resets: a success may leave
// the seeded accounts unusable for later inputs (deleted, taken down, a
// new password), so the server is renewed after one.
type procedure struct {
	nsid   string
	resets bool
	seeds  []string
}

// procedures are the other procedures with JSON input: the session,
// lifecycle, email, invite, app password, preference, PLC and admin
// methods.
var procedures = []procedure{
	{nsid: "com.atproto.server.createAppPassword", seeds: []string{`{"name":"ci"}`, `{"name":"ci-priv","privileged":true}`}},
	{nsid: "com.atproto.server.revokeAppPassword", seeds: []string{`{"name":"ci"}`, `{"name":""}`}},
	{nsid: "app.bsky.actor.putPreferences", seeds: []string{
		`{"preferences":[{"$type":"app.bsky.actor.defs#adultContentPref","enabled":false}]}`,
		`{"preferences":[{"$type":"app.bsky.actor.defs#personalDetailsPref","birthDate":"1990-01-01T00:00:00.000Z"}]}`,
		`{"preferences":[{"$type":"com.example.pref"}]}`, `{"preferences":[{}]}`, `{"preferences":{}}`}},
	{nsid: "com.atproto.server.deactivateAccount", resets: true, seeds: []string{`{}`, `{"deleteAfter":"2030-01-01T00:00:00Z"}`, `{"deleteAfter":"soon"}`}},
	{nsid: "com.atproto.server.deleteAccount", resets: true, seeds: []string{`{"did":"$alice","password":"alice-password","token":"AAAAA-BBBBB"}`}},
	{nsid: "com.atproto.server.confirmEmail", seeds: []string{`{"email":"alice@example.com","token":"AAAAA-BBBBB"}`, `{"email":"ALICE@example.com"}`}},
	{nsid: "com.atproto.server.requestPasswordReset", seeds: []string{`{"email":"alice@example.com"}`, `{"email":"nobody@example.com"}`}},
	{nsid: "com.atproto.server.resetPassword", resets: true, seeds: []string{`{"token":"AAAAA-BBBBB","password":"new-password"}`}},
	{nsid: "com.atproto.server.updateEmail", resets: true, seeds: []string{`{"email":"alice2@example.com"}`, `{"email":"alice3@example.com","token":"AAAAA-BBBBB"}`, `{"email":"bob@example.com"}`}},
	{nsid: "com.atproto.server.createInviteCode", seeds: []string{`{"useCount":1}`, `{"useCount":2,"forAccount":"$alice"}`, `{"useCount":-1}`}},
	{nsid: "com.atproto.server.createInviteCodes", seeds: []string{`{"codeCount":2,"useCount":1}`, `{"codeCount":1,"useCount":1,"forAccounts":["$alice","$bob"]}`}},
	{nsid: "com.atproto.identity.signPlcOperation", seeds: []string{`{"token":"AAAAA-BBBBB","alsoKnownAs":["at://alice.test"]}`, `{}`}},
	{nsid: "com.atproto.identity.submitPlcOperation", resets: true, seeds: []string{`{"operation":{"type":"plc_operation","rotationKeys":[],"verificationMethods":{},"alsoKnownAs":[],"services":{},"prev":null,"sig":"x"}}`, `{"operation":null}`}},
	{nsid: "com.atproto.admin.updateSubjectStatus", resets: true, seeds: []string{
		`{"subject":{"$type":"com.atproto.admin.defs#repoRef","did":"$alice"},"takedown":{"applied":true,"ref":"t1"}}`,
		`{"subject":{"$type":"com.atproto.admin.defs#repoRef","did":"$bob"},"deactivated":{"applied":true}}`,
		`{"subject":{"$type":"com.atproto.repo.strongRef","uri":"at://$alice/app.bsky.feed.post/3l4b6g6qbvs2a","cid":"` + seedCID + `"},"takedown":{"applied":true}}`,
		`{"subject":{"$type":"com.atproto.admin.defs#repoBlobRef","did":"$alice","cid":"` + seedCID + `"},"takedown":{"applied":false}}`,
		`{"subject":{"$type":"com.atproto.repo.strongRef","uri":"at://alice.test/app.bsky.feed.post/3l4b6g6qbvs2a","cid":"` + seedCID + `"},"takedown":{"applied":true}}`,
		`{"subject":{"$type":"com.atproto.admin.defs#repoBlobRef","did":"did:plc:aaaaaaaaaaaaaaaaaaaaaaaa","cid":"` + seedCID + `"},"takedown":{"applied":true}}`}},
	{nsid: "com.atproto.admin.updateAccountHandle", resets: true, seeds: []string{`{"did":"$alice","handle":"alice9.test"}`, `{"did":"$alice","handle":"bob.test"}`}},
	{nsid: "com.atproto.admin.updateAccountEmail", resets: true, seeds: []string{`{"account":"$alice","email":"a9@example.com"}`, `{"account":"alice.test","email":"bob@example.com"}`}},
	{nsid: "com.atproto.admin.updateAccountPassword", resets: true, seeds: []string{`{"did":"$alice","password":"x"}`}},
	{nsid: "com.atproto.admin.deleteAccount", resets: true, seeds: []string{`{"did":"$alice"}`, `{"did":"did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"}`}},
	{nsid: "com.atproto.admin.sendEmail", seeds: []string{`{"recipientDid":"$alice","senderDid":"$bob","content":"hi","subject":"s"}`}},
	{nsid: "com.atproto.admin.disableAccountInvites", resets: true, seeds: []string{`{"account":"$alice","note":"n"}`}},
	{nsid: "com.atproto.admin.enableAccountInvites", seeds: []string{`{"account":"$alice"}`}},
	{nsid: "com.atproto.admin.disableInviteCodes", resets: true, seeds: []string{`{"codes":["x"],"accounts":["$alice"]}`, `{}`}},
}

// FuzzProcedures is fuzzBody for the procedures above, one target: the
// method is part of the input.
func FuzzProcedures(f *testing.F) {
	p := newFuzzPDS(f)
	addTableSeeds(f, len(procedures), func(i int) (string, []string) {
		return procedures[i].nsid, append(slices.Clone(procedures[i].seeds), "") // and no body
	})
	f.Fuzz(func(t *testing.T, method, auth uint8, body string) {
		m := procedures[int(method)%len(procedures)]
		c := fuzzCall{NSID: m.nsid, Auth: p.auth(auth), Body: p.expand(body), NoBody: body == ""}
		r, ok := p.check(t, c)
		if ok && r.Status == 200 && m.resets {
			p.renew(t)
		}
	})
}

// authorized are the methods FuzzAuthorization calls: a session query, a
// repo write, an admin (or moderation service) method, a service auth
// request, and the refresh token's own method.
var authorized = []fuzzCall{
	{NSID: "com.atproto.server.getSession"},
	{NSID: "com.atproto.repo.createRecord", Body: `{"repo":"$alice","collection":"app.bsky.feed.post","record":` + seedPost + `}`},
	{NSID: "com.atproto.admin.getAccountInfo", Query: "did=$alice"},
	{NSID: "com.atproto.server.getServiceAuth", Query: "aud=did:web:example.com&lxm=com.atproto.repo.createRecord"},
	{NSID: "com.atproto.server.refreshSession", NoBody: true},
	{NSID: "app.bsky.actor.putPreferences", Body: `{"preferences":[]}`},
}

// FuzzAuthorization sends any Authorization header to the methods above.
func FuzzAuthorization(f *testing.F) {
	p := newFuzzPDS(f)
	for i := range authorized {
		for _, a := range []string{"Bearer $alice.access", "Bearer $alice.refresh", "Bearer $bob.access", "$admin", "",
			"Bearer", "Bearer ", "bearer $alice.access", "Bearer  $alice.access", "Basic !!!", "Basic YWRtaW46", "DPoP abc",
			"Bearer a.b", "Bearer abc.def.ghi", "Bearer e30.bm90anNvbg.sig", "Bearer eyJhbGciOiJFUzI1NksifQ.bm90anNvbg.sig",
			"Bearer eyJhbGciOiJFUzI1NksiLCJ0eXAiOiJKV1QifQ.eyJpc3MiOiJkaWQ6cGxjOmFiYyIsImF1ZCI6ImRpZDp3ZWI6bG9jYWxob3N0IiwiZXhwIjo5OTk5OTk5OTk5LCJseG0iOiJjb20uYXRwcm90by5hZG1pbi5nZXRBY2NvdW50SW5mbyJ9.c2ln",
		} {
			f.Add(uint8(i), a)
		}
	}
	f.Fuzz(func(t *testing.T, method uint8, authorization string) {
		c := authorized[int(method)%len(authorized)]
		c.Auth = p.expand(authorization)
		c.Body, c.Query = p.expand(c.Body), p.expand(c.Query)
		r, ok := p.check(t, c)
		if ok && r.Status == 200 && c.NSID == "com.atproto.server.refreshSession" {
			p.renew(t) // the refresh token the seeds name is spent
		}
	})
}
