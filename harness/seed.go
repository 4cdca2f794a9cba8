package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"
)

// Seed helpers write through the real write path (XRPC, with the account's
// client), so every write makes a commit and a firehose event, exactly as
// the code under test would see it.

// Ref points at a record: what replies, likes and reposts name.
type Ref struct {
	URI syntax.ATURI `json:"uri"`
	CID string       `json:"cid"`
}

// now is a record's createdAt.
func now() string { return syntax.DatetimeNow().String() }

// CreateRecord creates a record in collection (rkey chosen by the PDS).
// record is anything that marshals to the record's JSON; its $type is set
// to the collection when missing.
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
	value, err := withType(record, collection)
	if err != nil {
		t.Fatalf("%s %s: %v", method, collection, err)
	}
	in := map[string]any{"repo": a.DID.String(), "collection": collection, "record": value}
	if rkey != "" {
		in["rkey"] = rkey
	}
	var out Ref
	if err := a.Client.Post(t.Context(), syntax.NSID(method), in, &out); err != nil {
		t.Fatalf("%s %s: %v", method, collection, err)
	}
	return out
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
	if err := dec.Decode(&m); err != nil {
		return nil, errors.New("a record must marshal to a JSON object")
	}
	if _, ok := m["$type"]; !ok {
		m["$type"] = collection
	}
	return m, nil
}

// DeleteRecord deletes the record at uri (one of the account's).
func (a *Account) DeleteRecord(t testing.TB, uri syntax.ATURI) {
	t.Helper()
	_, err := comatproto.RepoDeleteRecord(t.Context(), a.Client, &comatproto.RepoDeleteRecord_Input{
		Repo: a.DID.String(), Collection: uri.Collection().String(), Rkey: uri.RecordKey().String(),
	})
	if err != nil {
		t.Fatalf("deleteRecord %s: %v", uri, err)
	}
}

// Post creates an app.bsky.feed.post.
func (a *Account) Post(t testing.TB, text string) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.feed.post", map[string]any{"text": text, "createdAt": now()})
}

// Reply posts text in reply to parent, in the thread that starts at root.
func (a *Account) Reply(t testing.TB, root, parent Ref, text string) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.feed.post", map[string]any{
		"text": text, "createdAt": now(),
		"reply": map[string]any{"root": root, "parent": parent},
	})
}

// Like likes subject.
func (a *Account) Like(t testing.TB, subject Ref) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.feed.like", map[string]any{"subject": subject, "createdAt": now()})
}

// Repost reposts subject.
func (a *Account) Repost(t testing.TB, subject Ref) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.feed.repost", map[string]any{"subject": subject, "createdAt": now()})
}

// Follow follows did.
func (a *Account) Follow(t testing.TB, did syntax.DID) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.graph.follow", map[string]any{"subject": did, "createdAt": now()})
}

// Block blocks did.
func (a *Account) Block(t testing.TB, did syntax.DID) Ref {
	t.Helper()
	return a.CreateRecord(t, "app.bsky.graph.block", map[string]any{"subject": did, "createdAt": now()})
}

// SetProfile writes the account's app.bsky.actor.profile (rkey self).
func (a *Account) SetProfile(t testing.TB, displayName, description string) Ref {
	t.Helper()
	return a.PutRecord(t, "app.bsky.actor.profile", "self", map[string]any{"displayName": displayName, "description": description})
}

// Blob is an uploaded blob, as records reference it.
type Blob struct {
	Type     string `json:"$type"`
	Ref      link   `json:"ref"`
	MimeType string `json:"mimeType"`
	Size     int64  `json:"size"`
}

type link struct {
	Link string `json:"$link"`
}

// UploadBlob uploads data with its content type; put the returned Blob in
// a record to keep it.
func (a *Account) UploadBlob(t testing.TB, data []byte, mimeType string) Blob {
	t.Helper()
	resp, err := a.Client.Do(t.Context(), &atclient.APIRequest{
		Method: "POST", Endpoint: "com.atproto.repo.uploadBlob",
		Body:    bytes.NewReader(data),
		Headers: map[string][]string{"Content-Type": {mimeType}},
	})
	if err != nil {
		t.Fatalf("uploadBlob: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Blob Blob `json:"blob"`
	}
	if resp.StatusCode != 200 {
		t.Fatalf("uploadBlob: HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("uploadBlob: %v", err)
	}
	return out.Blob
}

// PutPreferences replaces the account's app.bsky preferences.
func (a *Account) PutPreferences(t testing.TB, prefs ...map[string]any) {
	t.Helper()
	if prefs == nil {
		prefs = []map[string]any{}
	}
	if err := a.Client.Post(t.Context(), "app.bsky.actor.putPreferences", map[string]any{"preferences": prefs}, nil); err != nil {
		t.Fatalf("putPreferences: %v", err)
	}
}

// SetHandle changes the account's handle (com.atproto.identity.updateHandle).
func (a *Account) SetHandle(t testing.TB, handle string) {
	t.Helper()
	if err := comatproto.IdentityUpdateHandle(t.Context(), a.Client, &comatproto.IdentityUpdateHandle_Input{Handle: handle}); err != nil {
		t.Fatalf("updateHandle %s: %v", handle, err)
	}
	a.Handle = syntax.Handle(handle).Normalize()
}

// GetRecord reads the record at uri through com.atproto.repo.getRecord:
// its CID and value, or found=false.
func (p *PDS) GetRecord(t testing.TB, uri syntax.ATURI) (cid string, value map[string]any, found bool) {
	t.Helper()
	var out struct {
		CID   string         `json:"cid"`
		Value map[string]any `json:"value"`
	}
	err := atclient.NewAPIClient(p.url).Get(t.Context(), "com.atproto.repo.getRecord", map[string]any{
		"repo": uri.Authority().String(), "collection": uri.Collection().String(), "rkey": uri.RecordKey().String(),
	}, &out)
	var ae *atclient.APIError
	if errors.As(err, &ae) && ae.Name == "RecordNotFound" {
		return "", nil, false
	}
	if err != nil {
		t.Fatalf("getRecord %s: %v", uri, err)
	}
	return out.CID, out.Value, true
}

// RequireRecord fails the test unless the record at uri exists; it returns
// the record's value.
func (p *PDS) RequireRecord(t testing.TB, uri syntax.ATURI) map[string]any {
	t.Helper()
	_, v, ok := p.GetRecord(t, uri)
	if !ok {
		t.Fatalf("record %s does not exist", uri)
	}
	return v
}

// RequireNoRecord fails the test if the record at uri exists.
func (p *PDS) RequireNoRecord(t testing.TB, uri syntax.ATURI) {
	t.Helper()
	if _, _, ok := p.GetRecord(t, uri); ok {
		t.Fatalf("record %s exists", uri)
	}
}
