package pds_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/fakepds/fakepds/pds"
)

// suiteOps are the operations of the suite-shaped benchmark, in the order
// they run (benchcompare's workload (a)).
var suiteOps = []string{"createAccount", "createSession", "createRecord", "putRecord", "deleteRecord", "applyWrites", "getRecord", "listRecords", "uploadBlob", "getRepo"}

// BenchmarkSuiteShaped is the path a test suite takes: each iteration makes
// 40 new accounts and runs each operation once per account, operation after
// operation, so that nearly every call lands on a different account than
// the one before (benchcompare's workload (a), in process, with indigo's
// client). Between the writes and the reads each repo is filled to 100
// records (unmeasured). It reports each operation's p50 in µs, and its
// server-side p50 (srv-p50-us: the median over passes of
// each pass's p50 from the server's stats, without the client's cost);
// ns/op is a whole pass. "past-cache" runs it with fewer actor store handles than
// accounts in use (Config.ActorStoreCache 16), so that every call finds
// its store closed.
func BenchmarkSuiteShaped(b *testing.B) {
	for _, bc := range []struct {
		name  string
		cache int
	}{{"cached", 0}, {"past-cache", 16}} {
		b.Run(bc.name, func(b *testing.B) {
			s := start(b, pds.Config{NoPLCRateLimit: true, ActorStoreCache: bc.cache})
			lat, srv := map[string][]time.Duration{}, map[string][]time.Duration{}
			pass := 0
			for b.Loop() {
				suitePass(b, s, fmt.Sprintf("p%d", pass), 40, lat, srv)
				pass++
			}
			for _, op := range suiteOps {
				for _, m := range []struct {
					unit string
					d    []time.Duration
				}{{"-p50-us", lat[op]}, {"-srv-p50-us", srv[op]}} {
					if len(m.d) > 0 {
						slices.Sort(m.d)
						b.ReportMetric(float64(m.d[len(m.d)/2].Microseconds()), op+m.unit)
					}
				}
			}
		})
	}
}

// suitePass is one pass of BenchmarkSuiteShaped over n new accounts,
// adding each call's duration to lat and the server-side p50 of each
// operation's calls to srv.
func suitePass(b *testing.B, s *pds.Server, prefix string, n int, lat, srv map[string][]time.Duration) {
	ctx := b.Context()
	type acct struct {
		did, handle string
		cl          *atclient.APIClient
		rkey        string
		three       []string
	}
	accts := make([]*acct, n)
	timed := func(op string, fn func(a *acct) error) {
		s.Stats().Reset()
		for _, a := range accts {
			t0 := time.Now()
			if err := fn(a); err != nil {
				b.Fatalf("%s: %v", op, err)
			}
			lat[op] = append(lat[op], time.Since(t0))
		}
		for _, m := range s.Stats().Snapshot() {
			if strings.HasSuffix(m.Name, "."+op) {
				srv[op] = append(srv[op], m.P50)
			}
		}
	}
	anon := atclient.NewAPIClient(s.URL())
	s.Stats().Reset()
	for i := range accts {
		handle := fmt.Sprintf("%s-%d.test", prefix, i)
		email, pw := handle+"@example.com", "pw"
		t0 := time.Now()
		out, err := comatproto.ServerCreateAccount(ctx, anon, &comatproto.ServerCreateAccount_Input{Handle: handle, Email: &email, Password: &pw})
		if err != nil {
			b.Fatal(err)
		}
		lat["createAccount"] = append(lat["createAccount"], time.Since(t0))
		accts[i] = &acct{did: out.Did, handle: handle, cl: bearer(s, out.AccessJwt)}
	}
	for _, m := range s.Stats().Snapshot() {
		if m.Name == "com.atproto.server.createAccount" {
			srv["createAccount"] = append(srv["createAccount"], m.P50)
		}
	}
	const coll = "app.bsky.feed.post"
	creates := func(k int) []*comatproto.RepoApplyWrites_Input_Writes_Elem {
		w := make([]*comatproto.RepoApplyWrites_Input_Writes_Elem, k)
		for i := range w {
			w[i] = &comatproto.RepoApplyWrites_Input_Writes_Elem{RepoApplyWrites_Create: &comatproto.RepoApplyWrites_Create{Collection: coll, Value: post(fmt.Sprint(i))}}
		}
		return w
	}
	rkeyOf := func(uri string) string { return uri[strings.LastIndexByte(uri, '/')+1:] }
	timed("createSession", func(a *acct) error {
		_, err := comatproto.ServerCreateSession(ctx, anon, &comatproto.ServerCreateSession_Input{Identifier: a.handle, Password: "pw"})
		return err
	})
	timed("createRecord", func(a *acct) error {
		out, err := comatproto.RepoCreateRecord(ctx, a.cl, &comatproto.RepoCreateRecord_Input{Repo: a.did, Collection: coll, Record: post("hello")})
		if err == nil {
			a.rkey = rkeyOf(out.Uri)
		}
		return err
	})
	timed("putRecord", func(a *acct) error {
		// A map: indigo's input type sends swapRecord null (must not exist).
		in := map[string]any{"repo": a.did, "collection": coll, "rkey": a.rkey, "record": post("edited")}
		return a.cl.Post(ctx, "com.atproto.repo.putRecord", in, nil)
	})
	timed("deleteRecord", func(a *acct) error {
		_, err := comatproto.RepoDeleteRecord(ctx, a.cl, &comatproto.RepoDeleteRecord_Input{Repo: a.did, Collection: coll, Rkey: a.rkey})
		return err
	})
	timed("applyWrites", func(a *acct) error {
		out, err := comatproto.RepoApplyWrites(ctx, a.cl, &comatproto.RepoApplyWrites_Input{Repo: a.did, Writes: creates(3)})
		if err == nil {
			for _, r := range out.Results {
				a.three = append(a.three, rkeyOf(r.RepoApplyWrites_CreateResult.Uri))
			}
		}
		return err
	})
	for _, a := range accts {
		if _, err := comatproto.RepoApplyWrites(ctx, a.cl, &comatproto.RepoApplyWrites_Input{Repo: a.did, Writes: creates(97)}); err != nil {
			b.Fatal(err)
		}
	}
	timed("getRecord", func(a *acct) error {
		_, err := comatproto.RepoGetRecord(ctx, a.cl, "", coll, a.did, a.three[0])
		return err
	})
	timed("listRecords", func(a *acct) error {
		_, err := comatproto.RepoListRecords(ctx, a.cl, coll, "", 50, a.did, false)
		return err
	})
	blob := make([]byte, 4<<10)
	timed("uploadBlob", func(a *acct) error {
		_, _ = rand.Read(blob)
		_, err := comatproto.RepoUploadBlob(ctx, a.cl, bytes.NewReader(blob))
		return err
	})
	timed("getRepo", func(a *acct) error {
		_, err := comatproto.SyncGetRepo(ctx, a.cl, a.did, "")
		return err
	})
}

// BenchmarkConcurrentWriters is benchcompare's workload (c): 16 clients,
// each creating records in its own repo as fast as it can; ns/op is per
// write over all of them, p50/p95-us each write's latency. Run it with
// -blockprofile and -mutexprofile to find what the writers queue on.
func BenchmarkConcurrentWriters(b *testing.B) {
	s := start(b, pds.Config{NoPLCRateLimit: true})
	const writers = 16
	cls := make([]*atclient.APIClient, writers)
	dids := make([]string, writers)
	for i := range cls {
		a := createAccountB(b, s, fmt.Sprintf("writer%d.test", i))
		cls[i], dids[i] = bearer(s, a.AccessJwt), a.Did
	}
	var mu sync.Mutex
	var lat []time.Duration
	var next atomic.Int64
	b.SetParallelism((writers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)-1) % writers
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			if _, err := comatproto.RepoCreateRecord(b.Context(), cls[i], &comatproto.RepoCreateRecord_Input{Repo: dids[i], Collection: "app.bsky.feed.post", Record: post("hello")}); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
		b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds()), "p95-us")
	}
}
