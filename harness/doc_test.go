package harness_test

import (
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"

	"github.com/fakepds/fakepds/harness"
)

// The walkthrough of docs/harness.md, kept compiling and passing here.
func TestPostShowsUpOnTheFirehose(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	alice := p.NewAccount(t) // a unique handle, a logged-in indigo client

	fh := p.Firehose(t) // subscribed before the write: it will see it
	post := alice.Post(t, "hello world")

	// Other tests share the PDS: match on this test's account.
	e := fh.Require(t, func(e harness.Event) bool {
		return e.DID == alice.DID && e.HasOp("create", "app.bsky.feed.post/")
	})
	if e.Commit.Rev == "" {
		t.Fatalf("event %v has no rev", e)
	}
	p.RequireRecord(t, post.URI)

	sess, err := comatproto.ServerGetSession(t.Context(), alice.Client)
	if err != nil || sess.Handle != alice.Handle.String() {
		t.Fatal(sess, err)
	}

	ident, err := p.Directory().LookupHandle(t.Context(), alice.Handle)
	if err != nil || ident.DID != alice.DID {
		t.Fatal(ident, err)
	}
}
