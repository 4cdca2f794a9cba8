package pds_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/pds"
)

// benchRepo is a server with one account holding n posts, and its client.
func benchRepo(b *testing.B, n int) (*pds.Server, *comatproto.ServerCreateAccount_Output, func(string) *comatproto.RepoCreateRecord_Output) {
	s := start(b, pds.Config{})
	a := createAccountB(b, s, "bench.test")
	cl := bearer(s, a.AccessJwt)
	create := func(text string) *comatproto.RepoCreateRecord_Output {
		out, err := comatproto.RepoCreateRecord(b.Context(), cl, &comatproto.RepoCreateRecord_Input{Repo: a.Did, Collection: "app.bsky.feed.post", Record: post(text)})
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	for i := range n {
		create(fmt.Sprint(i))
	}
	return s, a, create
}

func createAccountB(b *testing.B, s *pds.Server, handle string) *comatproto.ServerCreateAccount_Output {
	email, pw := handle+"@example.com", "pw"
	out, err := comatproto.ServerCreateAccount(b.Context(), atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateAccount_Input{Handle: handle, Email: &email, Password: &pw})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// reportPercentiles adds p50 and p99 of per-op latencies.
func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-us")
}

// BenchmarkCreateRecord: one post into a repo of 1,000, over loopback HTTP.
func BenchmarkCreateRecord(b *testing.B) {
	_, _, create := benchRepo(b, 1000)
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		create("post")
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

// BenchmarkCreateRecordRoundRobin: createRecord on 100 accounts in turn,
// the suite's path (a different account every call) for as long as a CPU
// profile needs (BenchmarkSuiteShaped makes 40 writes of each kind a
// pass, among its account setup).
func BenchmarkCreateRecordRoundRobin(b *testing.B) {
	s := start(b, pds.Config{NoPLCRateLimit: true})
	type acct struct {
		did string
		cl  *atclient.APIClient
	}
	accts := make([]acct, 100)
	for i := range accts {
		a := createAccountB(b, s, fmt.Sprintf("rr-%d.test", i))
		accts[i] = acct{a.Did, bearer(s, a.AccessJwt)}
	}
	i := 0
	for b.Loop() {
		a := accts[i%len(accts)]
		if _, err := comatproto.RepoCreateRecord(b.Context(), a.cl, &comatproto.RepoCreateRecord_Input{Repo: a.did, Collection: "app.bsky.feed.post", Record: post("hello")}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkPutRecord(b *testing.B) {
	s, a, create := benchRepo(b, 1000)
	cl := bearer(s, a.AccessJwt)
	rkey := create("x").Uri[strings.LastIndex(create("x").Uri, "/")+1:]
	var lat []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		in := map[string]any{"repo": a.Did, "collection": "app.bsky.feed.post", "rkey": rkey,
			"record": map[string]any{"$type": "app.bsky.feed.post", "text": fmt.Sprint(i), "createdAt": "2026-11-30T12:00:00.000Z"}}
		if err := cl.Post(b.Context(), "com.atproto.repo.putRecord", in, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		i++
	}
	reportPercentiles(b, lat)
}

// BenchmarkApplyWrites: ten creates in one commit.
func BenchmarkApplyWrites(b *testing.B) {
	s, a, _ := benchRepo(b, 1000)
	cl := bearer(s, a.AccessJwt)
	writes := make([]*comatproto.RepoApplyWrites_Input_Writes_Elem, 10)
	for i := range writes {
		writes[i] = &comatproto.RepoApplyWrites_Input_Writes_Elem{RepoApplyWrites_Create: &comatproto.RepoApplyWrites_Create{Collection: "app.bsky.feed.post", Value: post(fmt.Sprint(i))}}
	}
	for b.Loop() {
		if _, err := comatproto.RepoApplyWrites(b.Context(), cl, &comatproto.RepoApplyWrites_Input{Repo: a.Did, Writes: writes}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetRecord(b *testing.B) {
	s, a, create := benchRepo(b, 1000)
	cl := bearer(s, a.AccessJwt)
	rkey := create("x").Uri[strings.LastIndex(create("x").Uri, "/")+1:]
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := comatproto.RepoGetRecord(b.Context(), cl, "", "app.bsky.feed.post", a.Did, rkey); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

func BenchmarkListRecords50(b *testing.B) {
	s, a, _ := benchRepo(b, 1000)
	cl := bearer(s, a.AccessJwt)
	for b.Loop() {
		if _, err := comatproto.RepoListRecords(b.Context(), cl, "app.bsky.feed.post", "", 50, a.Did, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetRepo: the CAR of a repo of 1,000 posts.
func BenchmarkGetRepo(b *testing.B) {
	s, a, _ := benchRepo(b, 1000)
	cl := atclient.NewAPIClient(s.URL())
	for b.Loop() {
		car, err := comatproto.SyncGetRepo(b.Context(), cl, a.Did, "")
		if err != nil || len(car) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteToFrame: from a createRecord's start to its #commit
// frame arriving at a subscriber (p50/p99-us), and when the frame arrives
// relative to the write's response (frame-after-response-us: negative when
// the frame comes first). The commit precedes both, so the second figure
// bounds the delay between a commit and its frame.
func BenchmarkWriteToFrame(b *testing.B) {
	s, _, create := benchRepo(b, 10)
	url := "ws" + strings.TrimPrefix(s.URL(), "http") + "/xrpc/com.atproto.sync.subscribeRepos"
	conn, _, err := websocket.DefaultDialer.DialContext(b.Context(), url, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	arrived := make(chan time.Time, 1)
	go func() {
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
			arrived <- time.Now()
		}
	}()
	var lat, after []time.Duration
	for b.Loop() {
		t0 := time.Now()
		create("frame")
		resp := time.Now()
		frame := <-arrived
		lat = append(lat, frame.Sub(t0))
		after = append(after, frame.Sub(resp))
	}
	reportPercentiles(b, lat)
	sort.Slice(after, func(i, j int) bool { return after[i] < after[j] })
	b.ReportMetric(float64(after[len(after)/2].Microseconds()), "frame-after-response-p50-us")
}
