package harness_test

import (
	"errors"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/fakepds/fakepds/harness"
)

func TestSeedAndFirehose(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	alice := p.NewAccount(t, harness.WithHandlePrefix("alice"))
	bob := p.NewAccount(t, harness.WithHandlePrefix("bob"))
	fh := p.Firehose(t)

	post := alice.Post(t, "hello")
	e := fh.Require(t, func(e harness.Event) bool {
		return e.DID == alice.DID && e.HasOp("create", "app.bsky.feed.post/")
	})
	if e.Commit == nil || e.Seq == 0 {
		t.Fatalf("event %v", e)
	}
	reply := bob.Reply(t, post, post, "hi alice")
	like := bob.Like(t, post)
	follow := bob.Follow(t, alice.DID)
	bob.SetProfile(t, "Bob", "a test account")
	for _, r := range []harness.Ref{reply, like, follow} {
		p.RequireRecord(t, r.URI)
	}
	if v := p.RequireRecord(t, reply.URI); v["text"] != "hi alice" {
		t.Fatalf("reply %v", v)
	}
	// The consumer has caught up once it has seen the head seq.
	if _, err := fh.WaitSeq(t.Context(), p.Seq(t)); err != nil {
		t.Fatal(err)
	}
	bob.DeleteRecord(t, like.URI)
	p.RequireNoRecord(t, like.URI)
	fh.Require(t, func(e harness.Event) bool {
		return e.HasOp("delete", like.URI.Collection().String()+"/"+like.URI.RecordKey().String())
	})
}

func TestFaults(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	a := p.NewAccount(t)
	p.Fail(t, "com.atproto.server.getSession", 2, 503, "NotEnoughResources")
	for i := range 3 {
		_, err := comatproto.ServerGetSession(t.Context(), a.Client)
		var ae *atclient.APIError
		if i < 2 && (!errors.As(err, &ae) || ae.StatusCode != 503 || ae.Name != "NotEnoughResources") {
			t.Fatalf("call %d: %v, want the injected 503", i, err)
		}
		if i == 2 && err != nil {
			t.Fatalf("call %d after the fault: %v", i, err)
		}
	}
	p.Delay(t, "com.atproto.server.getSession", 1, 50*time.Millisecond)
	p.ClearFaults(t)
	if _, err := comatproto.ServerGetSession(t.Context(), a.Client); err != nil {
		t.Fatal(err)
	}
	var got bool
	for _, m := range p.Stats(t) {
		if m.Name == "com.atproto.server.getSession" && m.Count == 4 && m.Errors == 2 {
			got = true
		}
	}
	if !got {
		t.Fatalf("stats do not show 4 getSession calls with 2 errors: %+v", p.Stats(t))
	}
}

// The clock expires tokens; the account's client refreshes on its own.
func TestClockExpiresTokens(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	a := p.NewAccount(t)
	p.Clock(t).Advance(3 * time.Hour)
	// indigo's password client sees ExpiredToken, refreshes, retries.
	if _, err := comatproto.ServerGetSession(t.Context(), a.Client); err != nil {
		t.Fatalf("getSession after the access token expired: %v", err)
	}
	if err := comatproto.ServerRequestEmailConfirmation(t.Context(), a.Client); err != nil {
		t.Fatal(err)
	}
	tok := p.EmailToken(t, a.Email, "confirm_email")
	p.Clock(t).Advance(20 * time.Minute)
	err := comatproto.ServerConfirmEmail(t.Context(), a.Client, &comatproto.ServerConfirmEmail_Input{Email: a.Email, Token: tok})
	var ae *atclient.APIError
	if !errors.As(err, &ae) || ae.Name != "ExpiredToken" {
		t.Fatalf("confirmEmail with a token 20 minutes old: %v", err)
	}
}

func TestDropFirehose(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	fh := p.Firehose(t)
	if n := p.DropFirehose(t); n != 1 {
		t.Fatalf("dropped %d subscribers, want 1", n)
	}
	if _, err := fh.Next(t.Context()); !errors.Is(err, harness.ErrFirehoseClosed) {
		t.Fatalf("after the drop: %v", err)
	}
}

// The same powers through the control plane, as a test binary attached to
// a shared fakepds (HARNESS_PDS_URL) uses them.
func TestPowersOverControlPlane(t *testing.T) {
	t.Parallel()
	local := harness.New(t)
	p := harness.Attach(local.URL(), local.PLCURL(), local.AdminPassword())
	if p.Server() != nil {
		t.Fatal("an attached PDS has an in-process server")
	}
	a := p.NewAccount(t)
	p.Fail(t, "com.atproto.server.getSession", 1, 500, "InternalServerError")
	if _, err := comatproto.ServerGetSession(t.Context(), a.Client); err == nil {
		t.Fatal("fault not applied")
	}
	before := p.Clock(t).Now()
	p.Clock(t).Advance(time.Hour)
	if d := p.Clock(t).Now().Sub(before); d < time.Hour {
		t.Fatalf("clock moved %v", d)
	}
	if err := comatproto.ServerRequestEmailConfirmation(t.Context(), a.Client); err != nil {
		t.Fatal(err)
	}
	if tok := p.EmailToken(t, a.DID.String(), "confirm_email"); len(tok) != 11 {
		t.Fatalf("token %q", tok)
	}
	if seq := p.Seq(t); seq < 4 {
		t.Fatalf("seq %d", seq)
	}
	if len(p.Stats(t)) == 0 {
		t.Fatal("no stats")
	}
	// The directory of an attached PDS resolves through HTTP.
	ident, err := p.Directory().LookupHandle(t.Context(), a.Handle)
	if err != nil || ident.DID != a.DID {
		t.Fatalf("LookupHandle over HTTP = %v, %v", ident, err)
	}
	// Wrong admin password: the power fails loudly, not silently.
	bad := harness.Attach(local.URL(), local.PLCURL(), "wrong")
	expectFatal(t, "ClearFaults with the wrong admin password", func(tb testing.TB) { bad.ClearFaults(tb) }, "401")
}
