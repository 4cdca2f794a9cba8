package harness_test

import (
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/api/bsky"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/harness"
)

// Issue 11.1: on a PDS that requires invites, NewAccount mints a code
// itself, takes one given, and an account made by hand becomes an
// *Account with Login.
func TestNewAccountWithInvites(t *testing.T) {
	t.Parallel()
	p := harness.New(t, harness.WithInvites())
	a := p.NewAccount(t)
	a.Post(t, "made with an invite the harness minted")
	b := p.NewAccount(t, harness.WithInviteCode(p.InviteCode(t)))

	email, pw := "byhand@example.com", "by-hand-pw"
	code := p.InviteCode(t)
	if _, err := comatproto.ServerCreateAccount(t.Context(), p.Client(), &comatproto.ServerCreateAccount_Input{
		Handle: "byhand.test", Email: &email, Password: &pw, InviteCode: &code,
	}); err != nil {
		t.Fatal(err)
	}
	h := p.Login(t, "byhand.test", pw)
	if h.Email != email || h.Handle != "byhand.test" {
		t.Fatalf("Login = %+v", h)
	}
	p.RequireRecord(t, h.Follow(t, b.DID).URI)
	expectFatal(t, "NewAccount with a used invite code", func(tb testing.TB) { p.NewAccount(tb, harness.WithInviteCode(code)) }, "InvalidInviteCode")
}

// Issue 11.2: DeleteRecord of a URI in another account's repo fails the
// test, and deletes nothing.
func TestDeleteRecordOfAnotherRepo(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a, b := p.NewAccount(t), p.NewAccount(t)
	post := a.Post(t, "mine")
	expectFatal(t, "b.DeleteRecord(a's post)", func(tb testing.TB) { b.DeleteRecord(tb, post.URI) }, string(a.DID), "not in this account's")
	p.RequireRecord(t, post.URI)
	a.DeletePost(t, post)
	p.RequireNoRecord(t, post.URI)
}

// Issue 11.3: indigo's record structs marshal "$type":""; the harness
// fills it in, and reads them back typed.
func TestIndigoRecordTypes(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a, b := p.NewAccount(t), p.NewAccount(t)
	follow := a.CreateRecord(t, "app.bsky.graph.follow", &bsky.GraphFollow{Subject: b.DID.String(), CreatedAt: "2026-01-02T03:04:05.000Z"})
	got, ok := harness.GetRecordAs[bsky.GraphFollow](t, p, follow.URI)
	if !ok || got.Subject != b.DID.String() || got.LexiconTypeID != "app.bsky.graph.follow" {
		t.Fatalf("GetRecordAs = %+v, %v", got, ok)
	}
	if _, ok := harness.GetRecordAs[bsky.FeedPost](t, p, syntax.ATURI("at://"+a.DID.String()+"/app.bsky.feed.post/nope")); ok {
		t.Fatal("a missing record was found")
	}
	// A Ref and indigo's strongRef convert both ways.
	if r := harness.RefOf(follow.StrongRef()); r != follow {
		t.Fatalf("RefOf(StrongRef) = %+v, want %+v", r, follow)
	}
	// The anonymous and admin clients are plain indigo clients.
	if _, err := comatproto.ServerDescribeServer(t.Context(), p.Client()); err != nil {
		t.Fatal(err)
	}
	info, err := comatproto.AdminGetAccountInfo(t.Context(), p.AdminClient(), a.DID.String())
	if err != nil || info.Handle != a.Handle.String() {
		t.Fatalf("admin getAccountInfo = %+v, %v", info, err)
	}
}

// Issue 11.13: the seeding the reference's SeedClient offers, written
// through the real write path and read back with indigo's types.
func TestSeeding(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	alice, bob := p.NewAccount(t, harness.WithHandlePrefix("alice")), p.NewAccount(t, harness.WithHandlePrefix("bob"))
	png := alice.UploadBlob(t, pngBytes, "image/png")
	if png.MimeType != "image/png" || png.Size != int64(len(pngBytes)) {
		t.Fatalf("UploadBlob = %+v", png)
	}
	first := alice.Post(t, "hello @"+bob.Handle.String()+", see https://example.com",
		harness.WithMention(bob), harness.WithLink("https://example.com"), harness.WithImages(png))
	post, _ := harness.GetRecordAs[bsky.FeedPost](t, p, first.URI)
	if post.Embed == nil || post.Embed.EmbedImages == nil || post.Embed.EmbedImages.Images[0].Image.Ref != png.Ref {
		t.Fatalf("embed %+v", post.Embed)
	}
	mention := post.Facets[0]
	if got := post.Text[mention.Index.ByteStart:mention.Index.ByteEnd]; got != "@"+bob.Handle.String() || mention.Features[0].RichtextFacet_Mention.Did != bob.DID.String() {
		t.Fatalf("mention facet over %q: %+v", got, mention.Features[0])
	}
	if link := post.Facets[1]; post.Text[link.Index.ByteStart:link.Index.ByteEnd] != "https://example.com" {
		t.Fatalf("link facet %+v", link.Index)
	}
	expectFatal(t, "WithMention of a handle not in the text", func(tb testing.TB) { alice.Post(tb, "nobody here", harness.WithMention(bob)) }, "does not contain")

	quote := bob.Post(t, "quoting, with a picture", harness.WithQuote(first), harness.WithImages(bob.UploadBlob(t, pngBytes, "image/png")))
	qp, _ := harness.GetRecordAs[bsky.FeedPost](t, p, quote.URI)
	if rwm := qp.Embed.EmbedRecordWithMedia; rwm == nil || rwm.Record.Record.Uri != first.URI.String() || rwm.Media.EmbedImages == nil {
		t.Fatalf("quote with media: %+v", qp.Embed)
	}

	// A thread: ReplyTo finds the root itself.
	r1 := bob.ReplyTo(t, first, "reply")
	r2 := alice.ReplyTo(t, r1, "reply to the reply")
	deep, _ := harness.GetRecordAs[bsky.FeedPost](t, p, r2.URI)
	if harness.RefOf(deep.Reply.Root) != first || harness.RefOf(deep.Reply.Parent) != r1 {
		t.Fatalf("reply refs %+v %+v", deep.Reply.Root, deep.Reply.Parent)
	}

	banner := alice.UploadBlob(t, pngBytes[:len(pngBytes)-1], "image/png")
	alice.SetProfile(t, "Alice", "seeded", harness.WithAvatar(png), harness.WithBanner(banner))
	prof, _ := harness.GetRecordAs[bsky.ActorProfile](t, p, syntax.ATURI("at://"+alice.DID.String()+"/app.bsky.actor.profile/self"))
	if prof.Avatar == nil || prof.Avatar.Ref != png.Ref || prof.Banner == nil || prof.Banner.Ref != banner.Ref {
		t.Fatalf("profile %+v", prof)
	}

	// Every undo deletes its record, and only a record of its kind.
	like, follow, block, repost := bob.Like(t, first), bob.Follow(t, alice.DID), bob.Block(t, alice.DID), bob.Repost(t, first)
	expectFatal(t, "Unfollow of a like", func(tb testing.TB) { bob.Unfollow(tb, like) }, "app.bsky.feed.like record, not app.bsky.graph.follow")
	bob.Unlike(t, like)
	bob.Unfollow(t, follow)
	bob.Unblock(t, block)
	bob.Unrepost(t, repost)
	bob.DeletePost(t, quote)
	for _, r := range []harness.Ref{like, follow, block, repost, quote} {
		p.RequireNoRecord(t, r.URI)
	}

	list := alice.CreateList(t, "friends", harness.CurateList)
	item := alice.AddToList(t, list, bob.DID)
	li, _ := harness.GetRecordAs[bsky.GraphListitem](t, p, item.URI)
	if li.List != list.URI.String() || li.Subject != bob.DID.String() {
		t.Fatalf("list item %+v", li)
	}
	alice.RemoveFromList(t, item)
	p.RequireNoRecord(t, item.URI)
}

// Issue 11.13: deactivate, takedown and restore, as the account's own
// client sees them.
func TestAccountStatusSeeding(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a := p.NewAccount(t)
	a.Deactivate(t)
	st, err := comatproto.ServerCheckAccountStatus(t.Context(), a.Client)
	if err != nil || st.Activated {
		t.Fatalf("after Deactivate: %+v, %v", st, err)
	}
	a.Activate(t)
	if st, err := comatproto.ServerCheckAccountStatus(t.Context(), a.Client); err != nil || !st.Activated {
		t.Fatalf("after Activate: %+v, %v", st, err)
	}
	p.Takedown(t, a.DID)
	rs, err := comatproto.SyncGetRepoStatus(t.Context(), p.Client(), a.DID.String())
	if err != nil || rs.Active || rs.Status == nil || *rs.Status != "takendown" {
		t.Fatalf("getRepoStatus after Takedown: %+v, %v", rs, err)
	}
	if _, err := comatproto.ServerGetSession(t.Context(), a.Client); err == nil {
		t.Fatal("the account's session still works after Takedown")
	}
	p.Restore(t, a.DID)
	if rs, err := comatproto.SyncGetRepoStatus(t.Context(), p.Client(), a.DID.String()); err != nil || !rs.Active {
		t.Fatalf("getRepoStatus after Restore: %+v, %v", rs, err)
	}
	if _, err := comatproto.ServerGetSession(t.Context(), a.Client); err != nil {
		t.Fatalf("getSession after Restore: %v", err)
	}
}

// pngBytes is a 1x1 PNG.
var pngBytes = []byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
	0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
	0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
	0x42, 0x60, 0x82,
}
