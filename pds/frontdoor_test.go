package pds_test

import (
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds"
)

// Procedures' input is checked from their lexicons by the mux, in schema
// order and with the reference's messages, before any handler runs. Every
// answer below was asked of the reference (npm @atproto/pds 0.5.35) with
// the same body, as the same kind of caller: it includes the cases where
// fakepds used to disagree with it (an object handle printed as JSON,
// long strings cut on one path only, "collection": 5 in applyWrites, Go's
// document order instead of the schema's, empty strings taken for missing
// keys).
func TestInputAnswersAsReference(t *testing.T) {
	s := start(t, pds.Config{})
	a := createAccount(t, s, "fd1.test", "fd1@example.com", "pw")
	long := strings.Repeat("a", 300)
	for _, tc := range []struct {
		caller, nsid, body, name, msg string
	}{
		{"user", "com.atproto.identity.updateHandle", `{"handle":{"a":1,"b":2,"c":3}}`, "InvalidRequest", `Expected string value type (got {"a": ..., "b": ..., ...}) at $.handle`},
		{"admin", "com.atproto.admin.updateAccountHandle", `{"did":"did:plc:x","handle":{"a":1,"b":2,"c":3}}`, "InvalidRequest", `Expected string value type (got {"a": ..., "b": ..., ...}) at $.handle`},
		{"admin", "com.atproto.admin.updateAccountHandle", `{"handle":{"a":1,"b":2,"c":3}}`, "InvalidRequest", `Missing required key "did" at $`},
		{"user", "com.atproto.repo.applyWrites", `{"repo":"fd1.test","writes":[{"$type":"com.atproto.repo.applyWrites#create","collection":5,"value":{}}]}`, "InvalidRequest", `Expected string value type (got 5) at $.writes[0].collection`},
		{"user", "com.atproto.repo.createRecord", `{"collection":5,"repo":"x"}`, "InvalidRequest", `Invalid AT identifier (got "x") at $.repo`},
		{"user", "com.atproto.repo.createRecord", `{"record":{},"collection":"app.bsky.feed.post"}`, "InvalidRequest", `Missing required key "repo" at $`},
		{"user", "com.atproto.repo.createRecord", `[1,2]`, "InvalidRequest", `Expected object value type (got [1, 2]) at $`},
		{"user", "com.atproto.identity.updateHandle", `{"handle":"LONG"}`, "InvalidRequest", `Invalid handle (got "LONGCUT") at $.handle`},
		{"user", "com.atproto.repo.deleteRecord", `{"repo":"fd1.test","collection":"LONG","rkey":"x"}`, "InvalidRequest", `Invalid NSID (got "LONGCUT") at $.collection`},
		{"user", "com.atproto.server.createAppPassword", `{"name":"x","privileged":"yes"}`, "InvalidRequest", `Expected boolean value type (got "yes") at $.privileged`},
		{"user", "com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","record":{"a":1.5}, "swapCommit":"bad"}`, "InvalidRequest", `Expected one of null, boolean, integer, string, cid, bytes, array or object value type (got 1.5) at $.record.a`},
		{"user", "com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","swapCommit":"bad","record":{"a":1.5}}`, "InvalidRequest", `Expected one of null, boolean, integer, string, cid, bytes, array or object value type (got 1.5) at $.record.a`},
		{"user", "com.atproto.repo.putRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","rkey":"a","record":{},"swapRecord":5}`, "InvalidRequest", `Expected string value type (got 5) at $.swapRecord`},
		{"user", "com.atproto.repo.applyWrites", `{"repo":"fd1.test","writes":[{"collection":"a.b.c"}]}`, "InvalidRequest", `Expected an object which includes the "$type" property value type (got {"collection": ...}) at $.writes[0]`},
		{"user", "com.atproto.repo.applyWrites", `{"repo":"fd1.test","writes":[{"$type":"x","collection":"a.b.c"}]}`, "InvalidRequest", `Expected one of "com.atproto.repo.applyWrites#create", "com.atproto.repo.applyWrites#update" or "com.atproto.repo.applyWrites#delete" (got "x") at $.writes[0].$type`},
		{"user", "com.atproto.repo.applyWrites", `{"writes":5,"repo":"fd1.test"}`, "InvalidRequest", `Expected array value type (got 5) at $.writes`},
		{"user", "com.atproto.repo.deleteRecord", `{"repo":"fd1.test","collection":"a.b.c","rkey":"x","swapRecord":"zz"}`, "InvalidRequest", `Invalid CID string (got "zz") at $.swapRecord`},
		{"user", "com.atproto.server.createAccount", `{"handle":5}`, "BadJwtType", `Invalid jwt type "at+jwt"`},
		{"user", "com.atproto.server.createSession", `{"identifier":"x","password":5}`, "InvalidRequest", `Expected string value type (got 5) at $.password`},
		{"user", "com.atproto.server.refreshSession", `{}`, "InvalidToken", `Token could not be verified`},
		{"user", "app.bsky.actor.putPreferences", `{"preferences":[{"a":1}]}`, "InvalidRequest", `Expected an object which includes the "$type" property value type (got {"a": ...}) at $.preferences[0]`},
		{"user", "app.bsky.actor.putPreferences", `{"preferences":{}}`, "InvalidRequest", `Expected array value type (got {}) at $.preferences`},
		{"user", "com.atproto.identity.submitPlcOperation", `{"operation":5}`, "InvalidRequest", `Expected object value type (got 5) at $.operation`},
		{"user", "com.atproto.server.updateEmail", `{"email":5}`, "InvalidRequest", `Expected string value type (got 5) at $.email`},
		{"user", "com.atproto.server.deactivateAccount", `{"deleteAfter":"x"}`, "InvalidRequest", `Invalid datetime (got "x") at $.deleteAfter`},
		{"user", "com.atproto.server.requestAccountDelete", `{"x":1}`, "InvalidRequest", `A request body was provided when none was expected`},
		{"admin", "com.atproto.server.createInviteCodes", `{"useCount":"1"}`, "InvalidRequest", `Expected integer value type (got "1") at $.useCount`},
		{"admin", "com.atproto.server.createInviteCode", `{"useCount":1.5}`, "InvalidRequest", `Expected integer value type (got 1.5) at $.useCount`},
		{"admin", "com.atproto.admin.updateSubjectStatus", `{"subject":{"$type":"com.atproto.admin.defs#repoRef","did":5}}`, "InvalidRequest", `Expected string value type (got 5) at $.subject.did`},
		{"admin", "com.atproto.admin.sendEmail", `{"recipientDid":"did:plc:x","content":"x","senderDid":5}`, "InvalidRequest", `Expected string value type (got 5) at $.senderDid`},
		{"user", "com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","record":{"text":"x","createdAt":"2024-01-01T00:00:00Z"},"rkey":"LONG"}`, "InvalidRequest", `Invalid record key for app.bsky.feed.post: Invalid TID string (got "LONGCUT") at $`},
		{"user", "com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","record":{"__proto__":{}}}`, "InvalidRequest", `Invalid key: __proto__`},
		{"user", "com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","record":5}`, "InvalidRequest", `Expected object value type (got 5) at $.record`},
		{"user", "com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","record":null}`, "InvalidRequest", `Expected object value type (got null) at $.record`},
		{"user", "com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","record":{},"validate":"x"}`, "InvalidRequest", `Expected boolean value type (got "x") at $.validate`},
		{"user", "com.atproto.server.createSession", `{"identifier":"","password":"x"}`, "AuthenticationRequired", `Invalid identifier or password`},
		{"user", "com.atproto.server.createSession", `{"identifier":"fd1.test","password":""}`, "AuthenticationRequired", `Invalid identifier or password`},
		{"user", "com.atproto.server.createSession", `{"identifier":"fd1.test"}`, "InvalidRequest", `Missing required key "password" at $`},
		{"user", "com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","record":{"text":"x","createdAt":"2024-01-01T00:00:00Z"},"rkey":"a","validate":true}`, "InvalidRequest", `Invalid record key for app.bsky.feed.post: Invalid TID string (got "a") at $`},
		{"admin", "com.atproto.server.createInviteCode", `{"useCount":1,"forAccount":""}`, "InvalidRequest", `Invalid DID (got "") at $.forAccount`},
		{"user", "app.bsky.actor.putPreferences", `{"preferences":[{"$type":"app.bsky.actor.defs#adultContentPref","enabled":"x"}]}`, "InvalidRequest", `Expected boolean value type (got "x") at $.preferences[0].enabled`},
		{"user", "com.atproto.server.requestEmailUpdate", `{"a":1}`, "InvalidRequest", `A request body was provided when none was expected`},
	} {
		authz := "Bearer " + a.AccessJwt
		if tc.caller == "admin" {
			authz = basicAuth(s.AdminPassword())
		}
		body := strings.ReplaceAll(tc.body, "LONG", long)
		msg := strings.ReplaceAll(tc.msg, "LONGCUT", long[:255]+"…")
		status, out := rawCall(t, s, "POST", tc.nsid, "", authz, &body)
		if status >= 500 || out["error"] != tc.name || out["message"] != msg {
			t.Errorf("%s %.80s:\n got %d %v %q\nwant %s %q", tc.nsid, tc.body, status, out["error"], out["message"], tc.name, msg)
		}
	}
}
