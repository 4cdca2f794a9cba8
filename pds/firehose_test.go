package pds_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/events"
	"github.com/bluesky-social/indigo/events/schedulers/sequential"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/pds"
)

// firehose consumes subscribeRepos with indigo's consumer and verifies every
// #commit and #sync with indigo's verifiers (structure, inversion, and the
// signature against the key the DID document names) before reporting it as
// "type:seq:did".
func firehose(t *testing.T, s *pds.Server, query string) <-chan string {
	t.Helper()
	url := "ws" + strings.TrimPrefix(s.URL(), "http") + "/xrpc/com.atproto.sync.subscribeRepos" + query
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 1000)
	report := func(format string, args ...any) { ch <- fmt.Sprintf(format, args...) }
	cb := &events.RepoStreamCallbacks{
		RepoCommit: func(e *comatproto.SyncSubscribeRepos_Commit) error {
			if _, err := indigorepo.VerifyCommitMessage(context.Background(), e); err != nil {
				report("invalid commit %d: %v", e.Seq, err)
				return nil
			}
			if err := indigorepo.VerifyCommitSignature(context.Background(), s.Directory(), e); err != nil {
				report("bad commit signature %d: %v", e.Seq, err)
				return nil
			}
			report("commit:%d:%s", e.Seq, e.Repo)
			return nil
		},
		RepoSync: func(e *comatproto.SyncSubscribeRepos_Sync) error {
			if _, err := indigorepo.VerifySyncMessage(context.Background(), s.Directory(), e); err != nil {
				report("invalid sync %d: %v", e.Seq, err)
				return nil
			}
			report("sync:%d:%s", e.Seq, e.Did)
			return nil
		},
		RepoIdentity: func(e *comatproto.SyncSubscribeRepos_Identity) error {
			h := ""
			if e.Handle != nil {
				h = *e.Handle
			}
			report("identity:%d:%s:%s", e.Seq, e.Did, h)
			return nil
		},
		RepoAccount: func(e *comatproto.SyncSubscribeRepos_Account) error {
			st := "active"
			if e.Status != nil {
				st = *e.Status
			}
			report("account:%d:%s:%v:%s", e.Seq, e.Did, e.Active, st)
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		events.HandleRepoStream(ctx, conn, sequential.NewScheduler("test", cb.EventHandler), slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); conn.Close(); <-done })
	return ch
}

func expectEvents(t *testing.T, ch <-chan string, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got := <-ch:
			if got != w {
				t.Fatalf("event %q, want %q", got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event within 10s, want %q", w)
		}
	}
}

// Account creation emits #identity, #account, the empty repo's #commit and
// #sync, in that order, each verified by indigo.
func TestCreateAccountEvents(t *testing.T) {
	s := start(t, pds.Config{})
	live := firehose(t, s, "")
	a := createAccount(t, s, "events.test", "events@example.com", "pw")
	want := []string{
		"identity:1:" + a.Did + ":events.test",
		"account:2:" + a.Did + ":true:active",
		"commit:3:" + a.Did,
		"sync:4:" + a.Did,
	}
	expectEvents(t, live, want...)
	expectEvents(t, firehose(t, s, "?cursor=0"), want...)
}
