package pds_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/fakepds/fakepds/internal/stacks"
	"github.com/fakepds/fakepds/pds"
)

// bigRepo makes an account whose repo holds records of about 300 KB each
// (unvalidated, of an unknown collection): about 10 MiB for 34.
func bigRepo(t *testing.T, s *pds.Server, handle string, records int) *comatproto.ServerCreateAccount_Output {
	t.Helper()
	a := createAccount(t, s, handle, strings.TrimSuffix(handle, ".test")+"@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	for i := range records {
		err := cl.LexDo(t.Context(), "POST", "application/json", "com.atproto.repo.createRecord", nil, map[string]any{
			"repo": a.Did, "collection": "com.example.big",
			"record": map[string]any{"$type": "com.example.big", "data": fmt.Sprintf("%02d", i) + strings.Repeat("x", 300_000)},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// getRepo streams its CAR: the server's heap rises by a fraction of a
// 10 MiB repo's CAR while a client reads it, where building it in memory
// first holds all of it (and more, as the buffer grows).
func TestGetRepoMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 10 MiB of records")
	}
	s := start(t, pds.Config{})
	a := bigRepo(t, s, "bigexport.test", 34)
	var n int64
	var err error
	grew := heapGrowth(t, func() {
		var resp *http.Response
		if resp, err = http.Get(s.URL() + "/xrpc/com.atproto.sync.getRepo?did=" + a.Did); err != nil {
			return
		}
		defer resp.Body.Close()
		n, err = io.Copy(io.Discard, resp.Body)
	})
	if err != nil || n < 34*300_000 {
		t.Fatalf("getRepo: %d bytes, %v", n, err)
	}
	t.Logf("getRepo of a %.1f MiB CAR: heap grew %.1f MiB at most", float64(n)/mib, float64(grew)/mib)
	if limit := uint64(n) / 2; grew > limit {
		t.Errorf("getRepo of a %d MiB CAR grew the heap by %d MiB, want under %d MiB", n/mib, grew/mib, limit/mib)
	}
}

// A client that stops reading a getRepo response is cut off after
// Config.WriteTimeout, and the actor store handle and read snapshot the
// response held are freed: with a single handle, another account's call
// that needs one answers once the deadline has passed.
func TestGetRepoStalledReaderIsCutOff(t *testing.T) {
	s := start(t, pds.Config{ActorStoreCache: 1, WriteTimeout: 300 * time.Millisecond, SlotWait: 30 * time.Second})
	a := bigRepo(t, s, "stalledread.test", 34)
	b := createAccount(t, s, "bystander.test", "bystander@example.com", "pw")
	ctx := t.Context()

	c := atclient.NewAPIClient(s.URL())
	c.Client = &http.Client{Timeout: 20 * time.Second}

	// A reader that sends its request and reads nothing (through a small
	// receive buffer, so that the server soon blocks writing to it).
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /xrpc/com.atproto.sync.getRepo?did=%s HTTP/1.1\r\nHost: pds\r\n\r\n", a.Did)
	waitFor(t, "getRepo to block writing to the stalled reader", func() bool {
		return stacks.Count("", "(*Server).syncGetRepo", "(*carStream).Write") == 1
	})
	waitFor(t, "the stalled getRepo to end", func() bool { return stacks.Count("", "(*Server).syncGetRepo") == 0 })
	if _, err := comatproto.SyncGetLatestCommit(ctx, c, b.Did); err != nil {
		t.Fatalf("another account's getLatestCommit after a stalled getRepo: %v", err)
	}
}
