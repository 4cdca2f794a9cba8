package lexval

import "testing"

// The messages are the reference's (npm @atproto/pds 0.5.35), asked with
// the same query strings.
func TestCheckParams(t *testing.T) {
	for _, c := range []struct{ nsid, query, want string }{
		{"com.atproto.admin.getInviteCodes", "limit=abc&sort=zzz", `Expected integer value type (got "abc")`},
		{"com.atproto.admin.getInviteCodes", "sort=zzz&limit=abc", `Expected integer value type (got "abc")`},
		{"com.atproto.admin.getInviteCodes", "limit=5000", `integer too big (maximum 500, got 5000)`},
		{"com.atproto.admin.getInviteCodes", "limit=1&limit=2", `Expected integer value type (got [1, 2])`},
		{"com.atproto.sync.getRepo", "since=x&did=abc", `Invalid DID (got "abc")`},
		{"com.atproto.sync.getRecord", "rkey=self", `Missing required key "did"`},
		{"com.atproto.sync.getRecord", "collection=x&did=did:plc:a", `Invalid NSID (got "x")`},
		{"com.atproto.sync.listRepos", "limit=-0", `integer too small (minimum 1, got 0)`},
		{"com.atproto.repo.listRecords", "repo=a&collection=b&reverse=yes", `Expected boolean value type (got "yes")`},
		{"com.atproto.admin.getAccountInfos", "dids=a&dids=did:plc:x", `Invalid DID (got "a")`},
		{"com.atproto.admin.getAccountInfo", "did=a&did=b", `Expected string value type (got ["a", "b"])`},
		{"com.atproto.admin.getAccountInfo", "did=&other=1", `Missing required key "did"`},
		{"com.atproto.admin.getAccountInfo", "did=did%3Aplc%3Aa", ``},
		{"com.atproto.sync.listRepos", "", ``},
		{"com.atproto.server.describeServer", "anything=1&anything=2", ``},
		{"com.example.unknown", "x=1", ``},
	} {
		err := CheckParams(c.nsid, c.query)
		want := ""
		if c.want != "" {
			want = "Invalid " + c.nsid + " params: " + c.want
		}
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s?%s: %q, want %q", c.nsid, c.query, got, want)
		}
	}
}
