package pds_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"

	"github.com/fakepds/fakepds/pds"
)

// BenchmarkReadHandlers is the server side of the suite-shaped reads: each
// iteration calls the operation once on each of 40 accounts of 100 records,
// through Server.Handler (no socket, no client), so that a CPU profile
// holds only the server's work. Past the first pass each account's
// first-use costs are paid; BenchmarkSuiteShaped keeps those.
func BenchmarkReadHandlers(b *testing.B) {
	s := start(b, pds.Config{NoPLCRateLimit: true})
	const n = 40
	type acct struct{ did, token, rkey string }
	accts := make([]acct, n)
	for i := range accts {
		a := createAccountB(b, s, fmt.Sprintf("reads%d.test", i))
		cl := bearer(s, a.AccessJwt)
		w := make([]*comatproto.RepoApplyWrites_Input_Writes_Elem, 100)
		for j := range w {
			w[j] = &comatproto.RepoApplyWrites_Input_Writes_Elem{RepoApplyWrites_Create: &comatproto.RepoApplyWrites_Create{Collection: "app.bsky.feed.post", Value: post(fmt.Sprint(j))}}
		}
		out, err := comatproto.RepoApplyWrites(b.Context(), cl, &comatproto.RepoApplyWrites_Input{Repo: a.Did, Writes: w})
		if err != nil {
			b.Fatal(err)
		}
		uri := out.Results[0].RepoApplyWrites_CreateResult.Uri
		accts[i] = acct{a.Did, a.AccessJwt, uri[len(uri)-13:]}
	}
	h := s.Handler()
	blob := make([]byte, 4<<10)
	for _, op := range []struct {
		name string
		req  func(a acct) *http.Request
	}{
		{"getRecord", func(a acct) *http.Request {
			return httptest.NewRequest("GET", "/xrpc/com.atproto.repo.getRecord?repo="+a.did+"&collection=app.bsky.feed.post&rkey="+a.rkey, nil)
		}},
		{"listRecords", func(a acct) *http.Request {
			return httptest.NewRequest("GET", "/xrpc/com.atproto.repo.listRecords?repo="+a.did+"&collection=app.bsky.feed.post&limit=50", nil)
		}},
		{"uploadBlob", func(a acct) *http.Request {
			_, _ = rand.Read(blob)
			r := httptest.NewRequest("POST", "/xrpc/com.atproto.repo.uploadBlob", bytes.NewReader(blob))
			r.Header.Set("Content-Type", "application/octet-stream")
			return r
		}},
		{"getRepo", func(a acct) *http.Request {
			return httptest.NewRequest("GET", "/xrpc/com.atproto.sync.getRepo?did="+a.did, nil)
		}},
	} {
		b.Run(op.name, func(b *testing.B) {
			for b.Loop() {
				for _, a := range accts {
					r := op.req(a)
					r.Header.Set("Authorization", "Bearer "+a.token)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Fatalf("%s: %d %s", op.name, w.Code, w.Body)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n)/1e3, "us/call")
		})
	}
}
