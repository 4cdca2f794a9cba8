package harness_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/api/bsky"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/fixtures"
	"github.com/fakepds/fakepds/harness"
)

// In a test, t is the test's *testing.T and the PDS closes with it. Here
// (and in any program) NewStandalone stands in for it.
func ExampleNew() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close() // closes the PDS, as the test's cleanup would

	p := harness.New(t)
	fmt.Println(strings.HasPrefix(p.URL(), "http://localhost:"))
	// Output: true
}

func ExampleStart() {
	p, err := harness.Start()
	if err != nil {
		panic(err)
	}
	defer p.Close()
	desc, err := comatproto.ServerDescribeServer(context.Background(), p.Client())
	fmt.Println(desc.AvailableUserDomains, err)
	// Output: [.test] <nil>
}

func ExamplePDS_NewAccount() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t)

	alice := p.NewAccount(t, harness.WithHandlePrefix("alice"))
	sess, err := comatproto.ServerGetSession(t.Context(), alice.Client)
	fmt.Println(strings.HasPrefix(sess.Handle, "alice-"), sess.Did == alice.DID.String(), err)
	// Output: true true <nil>
}

func ExamplePDS_Firehose() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t)
	alice := p.NewAccount(t)

	fh := p.Firehose(t) // in place when it returns: it sees the next write
	post := alice.Post(t, "hello")
	e := fh.Require(t, func(e harness.Event) bool { return e.HasRecordOp("create", post.URI) })
	fmt.Println(e.Type, e.DID == alice.DID, e.Commit.Ops[0].Action)
	// Output: #commit true create
}

func ExampleAccount_Post() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t)
	alice, bob := p.NewAccount(t), p.NewAccount(t)

	hello := alice.Post(t, "hi @"+bob.Handle.String(), harness.WithMention(bob))
	reply := bob.ReplyTo(t, hello, "hello yourself")
	post, _ := harness.GetRecordAs[bsky.FeedPost](t, p, reply.URI)
	fmt.Println(post.Text, post.Reply.Root.Uri == hello.URI.String())
	// Output: hello yourself true
}

func ExampleGetRecordAs() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t)
	a, b := p.NewAccount(t), p.NewAccount(t)

	follow := a.Follow(t, b.DID)
	rec, found := harness.GetRecordAs[bsky.GraphFollow](t, p, follow.URI)
	fmt.Println(found, rec.Subject == b.DID.String())
	// Output: true true
}

func ExampleWithFixture() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t, harness.WithFixture(fixtures.Social()))

	hello := p.FixtureRecord(t, "alice/hello")
	_, value, _ := p.GetRecord(t, hello.URI)
	fmt.Println(len(p.Fixture().Accounts), value["text"])
	// Output: 5 Hello from alice! First post on the test network.
}

func ExamplePDS_Fail() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t) // faults are server-wide: a private PDS
	a := p.NewAccount(t)

	p.Fail(t, "com.atproto.server.getSession", 1, 503, "NotEnoughResources")
	_, err := comatproto.ServerGetSession(t.Context(), a.Client)
	var ae *atclient.APIError
	fmt.Println(errors.As(err, &ae), ae.StatusCode, ae.Name)
	_, err = comatproto.ServerGetSession(t.Context(), a.Client)
	fmt.Println(err)
	// Output:
	// true 503 NotEnoughResources
	// <nil>
}

func ExamplePDS_Clock() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t) // the clock is server-wide: a private PDS
	a := p.NewAccount(t)

	p.Clock(t).Advance(3 * time.Hour) // the access token has expired
	_, err := comatproto.ServerGetSession(t.Context(), a.Client)
	fmt.Println("after a refresh:", err)
	// Output: after a refresh: <nil>
}

func ExamplePDS_EmailToken() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t)
	a := p.NewAccount(t)

	if err := comatproto.ServerRequestEmailConfirmation(t.Context(), a.Client); err != nil {
		t.Fatal(err)
	}
	token := p.EmailToken(t, a.Email, harness.PurposeConfirmEmail)
	err := comatproto.ServerConfirmEmail(t.Context(), a.Client, &comatproto.ServerConfirmEmail_Input{Email: a.Email, Token: token})
	fmt.Println(len(p.Emails(t, a.Email, "")), err)
	// Output: 1 <nil>
}

func ExamplePDS_WaitCaughtUp() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t)

	// A consumer under test, reading the firehose in its own goroutine.
	var seen atomic.Int64
	fh := p.Firehose(t)
	go func() {
		for {
			e, err := fh.Next(t.Context())
			if err != nil {
				return
			}
			seen.Store(e.Seq)
		}
	}()

	p.NewAccount(t).Post(t, "one")
	p.WaitCaughtUp(t, seen.Load) // until it has processed p.Seq
	fmt.Println(seen.Load() == p.Seq(t))
	// Output: true
}

func ExamplePDS_Restart() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t)
	a := p.NewAccount(t)
	post := a.Post(t, "kept")

	p.Restart(t)
	_, value, found := p.GetRecord(t, post.URI)
	fmt.Println(found, value["text"])
	// Output: true kept
}

// A test binary attached to a fakepds another process runs (what Main does
// with HARNESS_PDS_URL): the helpers work over HTTP, the powers through
// the control plane.
func ExampleAttach() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	running := harness.New(t) // stands in for `fakepds serve`

	p := harness.Attach(running.URL(), running.PLCURL(), running.AdminPassword())
	a := p.NewAccount(t)
	p.Fail(t, "com.atproto.server.getSession", 1, 500, "InternalServerError")
	_, err := comatproto.ServerGetSession(t.Context(), a.Client)
	fmt.Println(p.Server() == nil, err != nil)
	// Output: true true
}

// Two PDSes seeded alike make the same account for the same calls: its
// DID, handle and first post's CID, at the seeded clock's time.
func ExampleWithSeed() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	run := func() (*harness.Account, harness.Ref) {
		p := harness.New(t, harness.WithSeed(42))
		alice := p.NewAccount(t, harness.WithHandlePrefix("alice"))
		return alice, alice.Post(t, "hello")
	}
	a, postA := run()
	b, postB := run()
	fmt.Println(a.DID == b.DID, a.Handle == b.Handle, postA == postB)
	fmt.Println(postA.URI.RecordKey().String() == syntax.NewTIDFromTime(harness.SeedEpoch, 0).String())
	// Output:
	// true true true
	// true
}
