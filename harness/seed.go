package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/api/bsky"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"
	lexutil "github.com/bluesky-social/indigo/lex/util"
)

// Seed helpers write through the real write path (XRPC, with the account's
// client), so every write makes a commit and a firehose event, exactly as
// the code under test would see it. Records are indigo's types
// (bsky.FeedPost, bsky.GraphFollow, ...); each helper returns the Ref of
// what it wrote.

// Ref points at a record: what replies, likes and reposts name.
type Ref struct {
	URI syntax.ATURI `json:"uri"`
	CID string       `json:"cid"`
}

// StrongRef is r as indigo's com.atproto.repo.strongRef, for records built
// by hand (a like's subject, a reply's parent).
func (r Ref) StrongRef() *comatproto.RepoStrongRef {
	return &comatproto.RepoStrongRef{Uri: r.URI.String(), Cid: r.CID}
}

// RefOf is the Ref of an indigo strongRef (a reply's root, a like's
// subject read back).
func RefOf(s *comatproto.RepoStrongRef) Ref {
	return Ref{URI: syntax.ATURI(s.Uri), CID: s.Cid}
}

// now is a record's createdAt: the PDS's clock when it runs in-process
// (a seeded one's is frozen), the real time otherwise.
func (a *Account) now() string {
	if a.pds != nil {
		if srv := a.pds.Server(); srv != nil {
			return srv.Clock().Now().UTC().Format(syntax.AtprotoDatetimeLayout)
		}
	}
	return syntax.DatetimeNow().String()
}

// CreateRecord creates a record in collection (rkey chosen by the PDS).
// record is anything that marshals to the record's JSON, indigo's types
// included; its $type is set to the collection when missing or empty (as
// indigo's structs leave it).
func (a *Account) CreateRecord(t testing.TB, collection string, record any) Ref {
	t.Helper()
	return a.write(t, "com.atproto.repo.createRecord", collection, "", record)
}

// PutRecord creates or replaces the record at collection/rkey.
func (a *Account) PutRecord(t testing.TB, collection, rkey string, record any) Ref {
	t.Helper()
	return a.write(t, "com.atproto.repo.putRecord", collection, rkey, record)
}

func (a *Account) write(t testing.TB, method, collection, rkey string, record any) Ref {
	t.Helper()
	a.alive(t, method)
	value, err := withType(record, collection)
	if err != nil {
		t.Fatalf("harness: %s %s: %v", method, collection, err)
	}
	in := map[string]any{"repo": a.DID.String(), "collection": collection, "record": value}
	if rkey != "" {
		in["rkey"] = rkey
	}
	var out Ref
	if err := a.Client.Post(t.Context(), syntax.NSID(method), in, &out); err != nil {
		t.Fatalf("harness: %s %s: %v", method, collection, err)
	}
	return out
}

// alive fails t when the account's PDS was closed.
func (a *Account) alive(t testing.TB, what string) {
	t.Helper()
	if a.pds != nil {
		a.pds.alive(t, what)
	}
}

// withType returns record as a JSON object with $type set.
func withType(record any, collection string) (map[string]any, error) {
	b, err := json.Marshal(record)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("a record must marshal to a JSON object")
	}
	if typ, _ := m["$type"].(string); typ == "" {
		m["$type"] = collection
	}
	return m, nil
}

// DeleteRecord deletes the record at uri, which must be in the account's
// own repo: a URI in another repo fails the test (no account can delete
// another's records, and the PDS would delete nothing quietly).
func (a *Account) DeleteRecord(t testing.TB, uri syntax.ATURI) {
	t.Helper()
	a.alive(t, "DeleteRecord")
	if auth := uri.Authority(); auth.String() != a.DID.String() && auth.String() != a.Handle.String() {
		t.Fatalf("harness: DeleteRecord(%s): the record is in %s's repo, not in this account's (%s)", uri, auth, a.DID)
	}
	_, err := comatproto.RepoDeleteRecord(t.Context(), a.Client, &comatproto.RepoDeleteRecord_Input{
		Repo: a.DID.String(), Collection: uri.Collection().String(), Rkey: uri.RecordKey().String(),
	})
	if err != nil {
		t.Fatalf("harness: deleteRecord %s: %v", uri, err)
	}
}

// deleteOf deletes r after checking it is a record of collection: undoing
// a like with Unfollow is a mistake in the test, said as such.
func (a *Account) deleteOf(t testing.TB, what, collection string, r Ref) {
	t.Helper()
	if got := r.URI.Collection().String(); got != collection {
		t.Fatalf("harness: %s(%s): a %s record, not %s", what, r.URI, got, collection)
	}
	a.DeleteRecord(t, r.URI)
}

// PostOption adds to a post before it is written: images, a quote,
// facets, or anything else on indigo's bsky.FeedPost.
type PostOption func(*bsky.FeedPost) error

// WithImages embeds the images (blobs from UploadBlob), with no alt text.
// With WithQuote as well, the post embeds both (recordWithMedia).
func WithImages(images ...*lexutil.LexBlob) PostOption {
	return func(p *bsky.FeedPost) error {
		embed := &bsky.EmbedImages{LexiconTypeID: "app.bsky.embed.images"}
		for _, img := range images {
			embed.Images = append(embed.Images, &bsky.EmbedImages_Image{Image: img})
		}
		switch {
		case p.Embed == nil:
			p.Embed = &bsky.FeedPost_Embed{EmbedImages: embed}
		case p.Embed.EmbedRecord != nil:
			p.Embed = &bsky.FeedPost_Embed{EmbedRecordWithMedia: &bsky.EmbedRecordWithMedia{
				LexiconTypeID: "app.bsky.embed.recordWithMedia", Record: p.Embed.EmbedRecord, Media: &bsky.EmbedRecordWithMedia_Media{EmbedImages: embed},
			}}
		default:
			return errors.New("WithImages: the post already has media")
		}
		return nil
	}
}

// WithQuote quotes the record at r (a post, usually).
func WithQuote(r Ref) PostOption {
	return func(p *bsky.FeedPost) error {
		rec := &bsky.EmbedRecord{LexiconTypeID: "app.bsky.embed.record", Record: r.StrongRef()}
		switch {
		case p.Embed == nil:
			p.Embed = &bsky.FeedPost_Embed{EmbedRecord: rec}
		case p.Embed.EmbedImages != nil:
			p.Embed = &bsky.FeedPost_Embed{EmbedRecordWithMedia: &bsky.EmbedRecordWithMedia{
				LexiconTypeID: "app.bsky.embed.recordWithMedia", Record: rec, Media: &bsky.EmbedRecordWithMedia_Media{EmbedImages: p.Embed.EmbedImages},
			}}
		default:
			return errors.New("WithQuote: the post already quotes a record")
		}
		return nil
	}
}

// WithMention adds a mention facet for the first "@handle" of the
// account in the post's text (which must contain it).
func WithMention(who *Account) PostOption {
	return func(p *bsky.FeedPost) error {
		return facet(p, "@"+who.Handle.String(), &bsky.RichtextFacet_Features_Elem{
			RichtextFacet_Mention: &bsky.RichtextFacet_Mention{Did: who.DID.String()},
		})
	}
}

// WithLink adds a link facet for the first occurrence of uri in the
// post's text (which must contain it).
func WithLink(uri string) PostOption {
	return func(p *bsky.FeedPost) error {
		return facet(p, uri, &bsky.RichtextFacet_Features_Elem{RichtextFacet_Link: &bsky.RichtextFacet_Link{Uri: uri}})
	}
}

// facet adds a facet over the first occurrence of span in the text; its
// index is in UTF-8 bytes, as the lexicon says.
func facet(p *bsky.FeedPost, span string, feature *bsky.RichtextFacet_Features_Elem) error {
	i := strings.Index(p.Text, span)
	if i < 0 {
		return fmt.Errorf("the text %q does not contain %q", p.Text, span)
	}
	p.Facets = append(p.Facets, &bsky.RichtextFacet{
		Index:    &bsky.RichtextFacet_ByteSlice{ByteStart: int64(i), ByteEnd: int64(i + len(span))},
		Features: []*bsky.RichtextFacet_Features_Elem{feature},
	})
	return nil
}

// Post creates an app.bsky.feed.post with text and the options' images,
// quote and facets.
func (a *Account) Post(t testing.TB, text string, opts ...PostOption) Ref {
	t.Helper()
	return a.post(t, &bsky.FeedPost{Text: text, CreatedAt: a.now()}, opts)
}

func (a *Account) post(t testing.TB, p *bsky.FeedPost, opts []PostOption) Ref {
	t.Helper()
	for _, o := range opts {
		if err := o(p); err != nil {
			t.Fatalf("harness: post %q: %v", p.Text, err)
		}
	}
	return a.CreateRecord(t, "app.bsky.feed.post", p)
}

// Reply posts text in reply to parent, in the thread that starts at root.
func (a *Account) Reply(t testing.TB, root, parent Ref, text string, opts ...PostOption) Ref {
	t.Helper()
	return a.post(t, &bsky.FeedPost{Text: text, CreatedAt: a.now(), Reply: &bsky.FeedPost_ReplyRef{
		Root: root.StrongRef(), Parent: parent.StrongRef(),
	}}, opts)
}

// ReplyTo posts text in reply to parent, in parent's thread: the root is
// read from parent (parent itself when it is not a reply).
func (a *Account) ReplyTo(t testing.TB, parent Ref, text string, opts ...PostOption) Ref {
	t.Helper()
	a.alive(t, "ReplyTo")
	rec, ok := GetRecordAs[bsky.FeedPost](t, a.pds, parent.URI)
	if !ok {
		t.Fatalf("harness: ReplyTo(%s): no such post", parent.URI)
	}
	root := parent
	if rec.Reply != nil && rec.Reply.Root != nil {
		root = RefOf(rec.Reply.Root)
	}
	return a.Reply(t, root, parent, text, opts...)
}

// DeletePost deletes one of the account's posts.
func (a *Account) DeletePost(t testing.TB, post Ref) {
	t.Helper()
	a.deleteOf(t, "DeletePost", "app.bsky.feed.post", post)
}

// Like likes subject.
func (a *Account) Like(t testing.TB, subject Ref) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.feed.like", &bsky.FeedLike{Subject: subject.StrongRef(), CreatedAt: a.now()})
}

// Unlike deletes a like (the Ref Like returned).
func (a *Account) Unlike(t testing.TB, like Ref) {
	t.Helper()
	a.deleteOf(t, "Unlike", "app.bsky.feed.like", like)
}

// Repost reposts subject.
func (a *Account) Repost(t testing.TB, subject Ref) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.feed.repost", &bsky.FeedRepost{Subject: subject.StrongRef(), CreatedAt: a.now()})
}

// Unrepost deletes a repost (the Ref Repost returned).
func (a *Account) Unrepost(t testing.TB, repost Ref) {
	t.Helper()
	a.deleteOf(t, "Unrepost", "app.bsky.feed.repost", repost)
}

// Follow follows did.
func (a *Account) Follow(t testing.TB, did syntax.DID) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.graph.follow", &bsky.GraphFollow{Subject: did.String(), CreatedAt: a.now()})
}

// Unfollow deletes a follow (the Ref Follow returned).
func (a *Account) Unfollow(t testing.TB, follow Ref) {
	t.Helper()
	a.deleteOf(t, "Unfollow", "app.bsky.graph.follow", follow)
}

// Block blocks did.
func (a *Account) Block(t testing.TB, did syntax.DID) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.graph.block", &bsky.GraphBlock{Subject: did.String(), CreatedAt: a.now()})
}

// Unblock deletes a block (the Ref Block returned).
func (a *Account) Unblock(t testing.TB, block Ref) {
	t.Helper()
	a.deleteOf(t, "Unblock", "app.bsky.graph.block", block)
}

// The purposes of a list (app.bsky.graph.defs).
const (
	CurateList     = "app.bsky.graph.defs#curatelist"
	ModerationList = "app.bsky.graph.defs#modlist"
	ReferenceList  = "app.bsky.graph.defs#referencelist"
)

// CreateList creates an app.bsky.graph.list named name with purpose
// (CurateList, ModerationList, ReferenceList).
func (a *Account) CreateList(t testing.TB, name, purpose string) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.graph.list", &bsky.GraphList{Name: name, Purpose: &purpose, CreatedAt: a.now()})
}

// AddToList adds did to a list of the account's (an app.bsky.graph.listitem).
func (a *Account) AddToList(t testing.TB, list Ref, did syntax.DID) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.graph.listitem", &bsky.GraphListitem{List: list.URI.String(), Subject: did.String(), CreatedAt: a.now()})
}

// RemoveFromList deletes a list item (the Ref AddToList returned).
func (a *Account) RemoveFromList(t testing.TB, item Ref) {
	t.Helper()
	a.deleteOf(t, "RemoveFromList", "app.bsky.graph.listitem", item)
}

// ProfileOption adds to a profile before it is written: an avatar, a
// banner, or anything else on indigo's bsky.ActorProfile.
type ProfileOption func(*bsky.ActorProfile)

// WithAvatar sets the profile's avatar (a blob from UploadBlob).
func WithAvatar(b *lexutil.LexBlob) ProfileOption {
	return func(p *bsky.ActorProfile) { p.Avatar = b }
}

// WithBanner sets the profile's banner (a blob from UploadBlob).
func WithBanner(b *lexutil.LexBlob) ProfileOption {
	return func(p *bsky.ActorProfile) { p.Banner = b }
}

// SetProfile writes the account's app.bsky.actor.profile (rkey self).
func (a *Account) SetProfile(t testing.TB, displayName, description string, opts ...ProfileOption) Ref {
	t.Helper()
	p := &bsky.ActorProfile{DisplayName: &displayName, Description: &description}
	for _, o := range opts {
		o(p)
	}
	return a.PutRecord(t, "app.bsky.actor.profile", "self", p)
}

// UploadBlob uploads data with its content type and returns the blob as
// indigo's records hold it; put it in a record (WithImages, WithAvatar)
// to keep it.
func (a *Account) UploadBlob(t testing.TB, data []byte, mimeType string) *lexutil.LexBlob {
	t.Helper()
	a.alive(t, "UploadBlob")
	resp, err := a.Client.Do(t.Context(), &atclient.APIRequest{
		Method: http.MethodPost, Endpoint: "com.atproto.repo.uploadBlob",
		Body:    bytes.NewReader(data),
		Headers: map[string][]string{"Content-Type": {mimeType}},
	})
	if err != nil {
		t.Fatalf("harness: uploadBlob: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb atclient.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		t.Fatalf("harness: uploadBlob: %v", eb.APIError(resp.StatusCode))
	}
	var out comatproto.RepoUploadBlob_Output
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("harness: uploadBlob: %v", err)
	}
	return out.Blob
}

// PutPreferences replaces the account's app.bsky preferences.
func (a *Account) PutPreferences(t testing.TB, prefs ...map[string]any) {
	t.Helper()
	a.alive(t, "PutPreferences")
	if prefs == nil {
		prefs = []map[string]any{}
	}
	if err := a.Client.Post(t.Context(), "app.bsky.actor.putPreferences", map[string]any{"preferences": prefs}, nil); err != nil {
		t.Fatalf("harness: putPreferences: %v", err)
	}
}

// SetHandle changes the account's handle (com.atproto.identity.updateHandle).
func (a *Account) SetHandle(t testing.TB, handle string) {
	t.Helper()
	a.alive(t, "SetHandle")
	if err := comatproto.IdentityUpdateHandle(t.Context(), a.Client, &comatproto.IdentityUpdateHandle_Input{Handle: handle}); err != nil {
		t.Fatalf("harness: updateHandle %s: %v", handle, err)
	}
	a.Handle = syntax.Handle(handle).Normalize()
}

// Deactivate deactivates the account (com.atproto.server.deactivateAccount):
// its repo stops being served and the firehose says #account inactive.
func (a *Account) Deactivate(t testing.TB) {
	t.Helper()
	a.alive(t, "Deactivate")
	if err := comatproto.ServerDeactivateAccount(t.Context(), a.Client, &comatproto.ServerDeactivateAccount_Input{}); err != nil {
		t.Fatalf("harness: deactivateAccount: %v", err)
	}
}

// Activate activates a deactivated account again.
func (a *Account) Activate(t testing.TB) {
	t.Helper()
	a.alive(t, "Activate")
	if err := comatproto.ServerActivateAccount(t.Context(), a.Client); err != nil {
		t.Fatalf("harness: activateAccount: %v", err)
	}
}

// Takedown takes the account down with the admin password
// (com.atproto.admin.updateSubjectStatus): its sessions stop working, its
// repo is not served, the firehose says #account takendown.
func (p *PDS) Takedown(t testing.TB, did syntax.DID) {
	t.Helper()
	p.takedown(t, "Takedown", did, true)
}

// Restore reverses a Takedown.
func (p *PDS) Restore(t testing.TB, did syntax.DID) {
	t.Helper()
	p.takedown(t, "Restore", did, false)
}

func (p *PDS) takedown(t testing.TB, what string, did syntax.DID, applied bool) {
	t.Helper()
	p.alive(t, what)
	ref := "harness"
	_, err := comatproto.AdminUpdateSubjectStatus(t.Context(), p.AdminClient(), &comatproto.AdminUpdateSubjectStatus_Input{
		Subject:  &comatproto.AdminUpdateSubjectStatus_Input_Subject{AdminDefs_RepoRef: &comatproto.AdminDefs_RepoRef{Did: did.String()}},
		Takedown: &comatproto.AdminDefs_StatusAttr{Applied: applied, Ref: &ref},
	})
	if err != nil {
		t.Fatalf("harness: %s(%s): %v", what, did, err)
	}
}

// GetRecord reads the record at uri through com.atproto.repo.getRecord:
// its CID and value, or found=false.
func (p *PDS) GetRecord(t testing.TB, uri syntax.ATURI) (cid string, value map[string]any, found bool) {
	t.Helper()
	var out struct {
		CID   string         `json:"cid"`
		Value map[string]any `json:"value"`
	}
	if !p.getRecord(t, uri, &out) {
		return "", nil, false
	}
	return out.CID, out.Value, true
}

func (p *PDS) getRecord(t testing.TB, uri syntax.ATURI, out any) bool {
	t.Helper()
	p.alive(t, "GetRecord")
	err := p.Client().Get(t.Context(), "com.atproto.repo.getRecord", map[string]any{
		"repo": uri.Authority().String(), "collection": uri.Collection().String(), "rkey": uri.RecordKey().String(),
	}, out)
	var ae *atclient.APIError
	if errors.As(err, &ae) && ae.Name == "RecordNotFound" {
		return false
	}
	if err != nil {
		t.Fatalf("harness: getRecord %s: %v", uri, err)
	}
	return true
}

// GetRecordAs reads the record at uri into indigo's type for it
// (GetRecordAs[bsky.FeedPost]), or found=false. A record that does not
// decode as T fails the test.
func GetRecordAs[T any](t testing.TB, p *PDS, uri syntax.ATURI) (record *T, found bool) {
	t.Helper()
	var out struct {
		Value json.RawMessage `json:"value"`
	}
	if !p.getRecord(t, uri, &out) {
		return nil, false
	}
	record = new(T)
	if err := json.Unmarshal(out.Value, record); err != nil {
		t.Fatalf("harness: GetRecordAs[%T](%s): %v", *record, uri, err)
	}
	return record, true
}

// RequireRecord fails the test unless the record at uri exists; it returns
// the record's value.
func (p *PDS) RequireRecord(t testing.TB, uri syntax.ATURI) map[string]any {
	t.Helper()
	_, v, ok := p.GetRecord(t, uri)
	if !ok {
		t.Fatalf("harness: record %s does not exist", uri)
	}
	return v
}

// RequireNoRecord fails the test if the record at uri exists.
func (p *PDS) RequireNoRecord(t testing.TB, uri syntax.ATURI) {
	t.Helper()
	if _, _, ok := p.GetRecord(t, uri); ok {
		t.Fatalf("harness: record %s exists", uri)
	}
}
