package pds

import (
	"bytes"
	"crypto/sha256"
	"net/http/httptest"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// The write answers as xrpc.WriteJSON encoded them before they were
// written by hand.
type oldCommitMeta struct {
	CID string `json:"cid"`
	Rev string `json:"rev"`
}

type oldWriteOutput struct {
	URI              string         `json:"uri"`
	CID              string         `json:"cid"`
	Commit           *oldCommitMeta `json:"commit,omitempty"`
	ValidationStatus string         `json:"validationStatus,omitempty"`
}

type oldApplyResult struct {
	Type             string `json:"$type"`
	URI              string `json:"uri,omitempty"`
	CID              string `json:"cid,omitempty"`
	ValidationStatus string `json:"validationStatus,omitempty"`
}

func oldMetaOf(c *repo.Commit) *oldCommitMeta {
	if c == nil {
		return nil
	}
	return &oldCommitMeta{CID: c.CID.String(), Rev: c.Rev}
}

func encodedByWriteJSON(t *testing.T, v any) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	xrpc.WriteJSON(rec, 200, v)
	return rec.Body.Bytes()
}

// TestWriteAnswers: createRecord's, putRecord's, deleteRecord's and
// applyWrites' hand-written answers are the bytes xrpc.WriteJSON made of
// their structs: DIDs and record keys that need quoting (quotes, control
// characters, HTML characters, U+2028, invalid UTF-8), no commit, no
// validation status, CIDv0 and CIDv1, no writes.
func TestWriteAnswers(t *testing.T) {
	t.Parallel()
	sum := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	mh, err := multihash.Encode(sum("v0"), multihash.SHA2_256)
	if err != nil {
		t.Fatal(err)
	}
	v0, v1 := cid.NewCidV0(mh), cid.NewCidV1(cid.DagCBOR, mustMH(t, sum("v1")))
	raw := cid.NewCidV1(cid.Raw, mustMH(t, sum("raw")))
	commits := []*repo.Commit{nil, {CID: v1, Rev: "3kaaaaaaaaaaa"}, {CID: v0, Rev: "a\"b<>&\u2028\x01\xff"}}
	dids := []string{"did:plc:abcdefghijklmnopqrstuvwx", "did:web:\"quoted\"", "did:web:a<b>&\u2028\u2029\x00\t\xfe"}
	rkeys := []string{"3kaaaaaaaaaaa", "self", "a\\b", "é🦋"}
	for _, did := range dids {
		for _, rkey := range rkeys {
			for _, commit := range commits {
				for _, status := range []string{"", "valid", "unknown"} {
					for _, c := range []cid.Cid{v0, v1, raw} {
						p := prepared{Write: repo.Write{Action: repo.ActionCreate, Collection: syntax.NSID("app.bsky.feed.post"), RKey: syntax.RecordKey(rkey)}, status: status}
						want := encodedByWriteJSON(t, oldWriteOutput{URI: string(p.uri(did)), CID: c.String(), Commit: oldMetaOf(commit), ValidationStatus: status})
						if got := writeAnswer(did, p, c, commit); !bytes.Equal(got, want) {
							t.Errorf("writeAnswer:\n got %s\nwant %s", got, want)
						}
					}
				}
				want := encodedByWriteJSON(t, struct {
					Commit *oldCommitMeta `json:"commit,omitempty"`
				}{oldMetaOf(commit)})
				if got := deleteAnswer(commit); !bytes.Equal(got, want) {
					t.Errorf("deleteAnswer:\n got %s\nwant %s", got, want)
				}

				// applyWrites: a create, an update, a delete, a write
				// without a result CID.
				var writes []prepared
				var results []repo.Result
				for i, a := range []repo.Action{repo.ActionCreate, repo.ActionUpdate, repo.ActionDelete, repo.ActionUpdate} {
					writes = append(writes, prepared{Write: repo.Write{Action: a, Collection: "com.example.fooBar", RKey: syntax.RecordKey(rkey)}, status: []string{"valid", "unknown", "", ""}[i]})
					var rc *cid.Cid
					if a != repo.ActionDelete && i < 3 {
						rc = &[]cid.Cid{v1, raw, v0}[i]
					}
					results = append(results, repo.Result{CID: rc})
				}
				if commit != nil {
					commit.Results = results
				}
				for n := range len(writes) + 1 {
					out := struct {
						Commit  *oldCommitMeta   `json:"commit,omitempty"`
						Results []oldApplyResult `json:"results"`
					}{Commit: oldMetaOf(commit), Results: make([]oldApplyResult, n)}
					for i, p := range writes[:n] {
						res := oldApplyResult{Type: "com.atproto.repo.applyWrites#" + string(p.Action) + "Result"}
						if p.Action != repo.ActionDelete {
							res.URI, res.ValidationStatus = string(p.uri(did)), p.status
							if commit != nil && commit.Results[i].CID != nil {
								res.CID = commit.Results[i].CID.String()
							}
						}
						out.Results[i] = res
					}
					want := encodedByWriteJSON(t, out)
					if got := applyAnswer(did, writes[:n], commit); !bytes.Equal(got, want) {
						t.Errorf("applyAnswer:\n got %s\nwant %s", got, want)
					}
				}
			}
		}
	}
}

func mustMH(t *testing.T, digest []byte) multihash.Multihash {
	t.Helper()
	mh, err := multihash.Encode(digest, multihash.SHA2_256)
	if err != nil {
		t.Fatal(err)
	}
	return mh
}

// TestAppendCID: appendCID writes cid.Cid's String, from the bytes or the
// KeyString, for CIDs of every length modulo 5 (the base32 tail).
func TestAppendCID(t *testing.T) {
	t.Parallel()
	for n := 0; n < 40; n++ {
		digest := bytes.Repeat([]byte{byte(n*37 + 1)}, n)
		for _, codec := range []uint64{cid.DagCBOR, cid.Raw} {
			for _, code := range []uint64{multihash.IDENTITY, multihash.SHA2_256} {
				if code == multihash.SHA2_256 && n != 32 {
					continue
				}
				mh, err := multihash.Encode(digest, code)
				if err != nil {
					t.Fatal(err)
				}
				c := cid.NewCidV1(codec, mh)
				want := c.String()
				if got := string(appendCID([]byte("x"), c.Bytes())); got != "x"+want {
					t.Errorf("appendCID(bytes) = %s, want %s", got, want)
				}
				if got := string(appendCID(nil, c.KeyString())); got != want {
					t.Errorf("appendCID(KeyString) = %s, want %s", got, want)
				}
				if code == multihash.SHA2_256 && codec == cid.DagCBOR {
					v0 := cid.NewCidV0(mh)
					if got := string(appendCID(nil, v0.KeyString())); got != v0.String() {
						t.Errorf("appendCID(v0) = %s, want %s", got, v0.String())
					}
				}
			}
		}
	}
}
