package repo_test

import (
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/internal/fsname"
	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
)

// benchRecords is the size of the repo the benchmarks run on.
const benchRecords = 1000

// benchFixture is a repo of benchRecords posts with TID rkeys (as posts
// have: each new one lands at the right edge of the tree) in a store on the
// temp dir's disk, with the fsync toggle as given.
func benchFixture(b *testing.B, fsync bool) (*fixture, []syntax.RecordKey) {
	b.Helper()
	dir := b.TempDir()
	b.Logf("data dir %s on %s", dir, fsname.Of(dir))
	f := newFixture(b, dir)
	if fsync {
		f.db.Close()
		db, err := store.Open(b.Context(), filepath.Join(dir, "actor.sqlite"), store.Options{Fsync: true, Migrations: actorstore.Migrations})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		f.db = db
	}
	clock := syntax.NewTIDClock(0)
	var rkeys []syntax.RecordKey
	for len(rkeys) < benchRecords {
		writes := make([]repo.Write, 0, repo.MaxWrites)
		for range repo.MaxWrites {
			rkey := clock.Next().String()
			rkeys = append(rkeys, syntax.RecordKey(rkey))
			writes = append(writes, create(b, rkey, "hello world, post "+rkey))
		}
		if _, err := f.apply(writes, nil); err != nil {
			b.Fatal(err)
		}
	}
	return f, rkeys
}

// BenchmarkApply is one createRecord's repo work (one write transaction:
// Apply with one create, on a repo that starts at 1,000 records), with the
// fsync toggle off and on. Run it on a real disk: the log line names the
// filesystem.
func BenchmarkApply(b *testing.B) {
	for _, tc := range []struct{ fsync, writer bool }{{false, true}, {true, true}, {false, false}} {
		b.Run(fmt.Sprintf("fsync=%v/writer=%v", tc.fsync, tc.writer), func(b *testing.B) {
			f, _ := benchFixture(b, tc.fsync)
			if tc.writer {
				f.withWriter()
			}
			ctx := b.Context()
			clock := syntax.NewTIDClock(1)
			vals := make([][]byte, 0, 1024)
			for i := range cap(vals) {
				vals = append(vals, post(b, fmt.Sprint("a new post ", i)))
			}
			i := 0
			cpu := cpuTime()
			for b.Loop() {
				w := repo.Write{Action: repo.ActionCreate, Collection: posts, RKey: syntax.RecordKey(clock.Next().String()), Value: vals[i%len(vals)]}
				if f.w != nil {
					// As the server does before each write: what earlier
					// writes ran unprepared (more dead blocks than
					// singleRows: stmtDelBlocks) is prepared once.
					if err := f.w.Prepare(ctx, []repo.Write{w}, false); err != nil {
						b.Fatal(err)
					}
				}
				err := f.db.Write(ctx, func(tx *sql.Tx) error {
					var err error
					if f.w != nil {
						_, err = f.w.Apply(ctx, tx, f.did, f.key, []repo.Write{w}, nil, time.Now())
					} else {
						_, err = repo.Apply(ctx, tx, f.did, f.key, []repo.Write{w}, nil, time.Now())
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU the process has used (user and system), in ns. Wall
// time on a shared machine measures the neighbours too; CPU per op is the
// figure to compare between versions.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkGetRecord(b *testing.B) {
	f, rkeys := benchFixture(b, false)
	ctx := b.Context()
	i := 0
	for b.Loop() {
		if _, _, err := repo.GetRecord(ctx, f.db.Reader(), posts, rkeys[i%len(rkeys)], nil); err != nil {
			b.Fatal(err)
		}
		i += 7
	}
}

func BenchmarkListRecords50(b *testing.B) {
	f, _ := benchFixture(b, false)
	ctx := b.Context()
	for b.Loop() {
		recs, _, err := repo.ListRecords(ctx, f.db.Reader(), posts, 50, "", false)
		if err != nil || len(recs) != 50 {
			b.Fatal(len(recs), err)
		}
	}
}

func BenchmarkExportCAR(b *testing.B) {
	f, _ := benchFixture(b, false)
	ctx := b.Context()
	for b.Loop() {
		if err := repo.ExportCAR(ctx, f.db.Reader(), io.Discard, ""); err != nil {
			b.Fatal(err)
		}
	}
}
