// Package backendtest checks that the harness API works on a backend's
// PDS; the backend packages' tests share it.
package backendtest

import (
	"testing"

	"github.com/fakepds/fakepds/harness"
)

// Exercise checks the harness API on a PDS that is not fakepds:
// accounts, writes, the firehose, the directory; the powers skip.
func Exercise(t *testing.T, p *harness.PDS) {
	t.Helper()
	if p.Server() != nil {
		t.Fatal("a backend PDS has an in-process server")
	}
	fh := p.Firehose(t)
	a := p.NewAccount(t)
	post := a.Post(t, "hello from the harness")
	fh.Require(t, func(e harness.Event) bool { return e.DID == a.DID && e.HasRecordOp("create", post.URI) })
	p.RequireRecord(t, post.URI)
	ident, err := p.Directory().LookupHandle(t.Context(), a.Handle)
	if err != nil || ident.DID != a.DID {
		t.Fatalf("LookupHandle(%s) = %v, %v", a.Handle, ident, err)
	}
	t.Run("powers skip", func(t *testing.T) {
		p.Fail(t, "com.atproto.repo.createRecord", 1, 500, "InternalServerError")
		t.Fatal("Fail did not skip on a PDS that is not fakepds")
	})
}
