package reliability

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	_ "modernc.org/sqlite"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/internal/chain"
)

// integrityCheck runs PRAGMA integrity_check on every database under dir
// and returns how many it checked. No server may have them open: a server
// holds its databases locked against other processes (pds/store's vfs).
func integrityCheck(t testing.TB, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sqlite") {
			return err
		}
		// Through the server's VFS: SQLite's default would leave a -shm
		// file beside each store, which the server's connections never use.
		db, err := sql.Open("sqlite", "file:"+path+"?vfs=unix-excl&_pragma=busy_timeout(10000)")
		if err != nil {
			return err
		}
		defer db.Close()
		var res string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if res != "ok" {
			t.Errorf("integrity_check of %s: %s", path, res)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkRepo verifies did's repo as exported by getRepo, with indigo: the
// commit's structure and signature, every record block present and
// matching its CID; then that the records are exactly want (rkey -> CID,
// "" for deleted), skipping the rkeys in unsure, and that listRecords
// lists exactly the tree's records. It returns the commit's rev.
func checkRepo(ctx context.Context, c *client, dir identity.Directory, did string, want map[string]string, unsure map[string]bool) (string, error) {
	car, err := c.getRepo(ctx, did)
	if err != nil {
		return "", fmt.Errorf("getRepo: %w", err)
	}
	commit, r, err := repo.LoadRepoFromCAR(ctx, bytes.NewReader(car))
	if err != nil {
		return "", fmt.Errorf("the CAR does not load: %w", err)
	}
	ident, err := dir.LookupDID(ctx, syntax.DID(did))
	if err != nil {
		return "", err
	}
	key, err := ident.PublicKey()
	if err != nil {
		return "", err
	}
	if err := commit.VerifySignature(key); err != nil {
		return "", fmt.Errorf("commit signature: %w", err)
	}
	tree := map[string]string{}
	err = r.MST.Walk(func(k []byte, v cid.Cid) error {
		coll, rkey, err := syntax.ParseRepoPath(string(k))
		if err != nil {
			return err
		}
		data, got, err := r.GetRecordBytes(ctx, coll, rkey)
		if err != nil {
			return fmt.Errorf("record %s: %w", k, err)
		}
		if sum, err := v.Prefix().Sum(data); err != nil || !sum.Equals(*got) || !got.Equals(v) {
			return fmt.Errorf("record %s: block does not match its CID %s", k, v)
		}
		tree[rkey.String()] = v.String()
		return nil
	})
	if err != nil {
		return "", err
	}
	for rkey, c := range want {
		if unsure[rkey] {
			continue
		}
		if got := tree[rkey]; got != c {
			return "", fmt.Errorf("acknowledged record %s: want CID %q (empty: deleted), the repo has %q", rkey, c, got)
		}
	}
	for rkey := range tree {
		if _, ok := want[rkey]; !ok && !unsure[rkey] {
			return "", fmt.Errorf("record %s in the repo was never written", rkey)
		}
	}
	list, err := c.listAll(ctx, did)
	if err != nil {
		return "", fmt.Errorf("listRecords: %w", err)
	}
	if len(list) != len(tree) {
		return "", fmt.Errorf("listRecords lists %d records, the tree holds %d", len(list), len(tree))
	}
	for _, l := range list {
		rkey := l.URI[strings.LastIndexByte(l.URI, '/')+1:]
		if tree[rkey] != l.CID {
			return "", fmt.Errorf("listRecords has %s at %s, the tree %q", rkey, l.CID, tree[rkey])
		}
	}
	return commit.Rev, nil
}

// directory resolves p's DIDs, each once: a consumer checks a signature
// per event.
func directory(p *harness.PDS) identity.Directory {
	return identity.NewCacheDirectory(p.Directory(), 100_000, time.Hour, time.Second, time.Hour)
}

// replay is what a consumer read from cursor 0.
type replay struct {
	events, commits, syncs int
	// resyncs are the #sync events that moved a repo past what its
	// #commits had said: the crash recovery's.
	resyncs int
	revs    map[string]map[string]bool // did -> revs of its #commits
}

// readFirehose reads the whole firehose from cursor 0 until every commit
// in until (did -> rev) has arrived, checking seqs only grow and every
// repo's chain as a strict consumer (package chain) does.
func readFirehose(t testing.TB, p *harness.PDS, until map[string]string) replay {
	t.Helper()
	ctx := t.Context()
	fh := p.Firehose(t, harness.FromSeq(0), harness.WaitAtMost(time.Minute))
	ck := chain.Checker{Directory: directory(p)}
	rp := replay{revs: map[string]map[string]bool{}}
	left := len(until)
	var last int64
	for left > 0 {
		e, err := fh.Next(ctx)
		if err != nil {
			t.Fatalf("firehose after %d events, waiting for %d commits: %v", rp.events, left, err)
		}
		rp.events++
		if e.Seq <= last {
			t.Fatalf("firehose seq %d after %d", e.Seq, last)
		}
		last = e.Seq
		switch {
		case e.Commit != nil:
			if err := ck.Commit(ctx, e.Commit); err != nil {
				t.Fatal(err)
			}
			rp.commits++
			if rp.revs[e.DID.String()] == nil {
				rp.revs[e.DID.String()] = map[string]bool{}
			}
			rp.revs[e.DID.String()][e.Commit.Rev] = true
			if until[e.DID.String()] == e.Commit.Rev {
				left--
			}
		case e.Sync != nil:
			prev, known := ck.Repo(e.DID.String())
			if err := ck.Sync(ctx, e.Sync); err != nil {
				t.Fatal(err)
			}
			rp.syncs++
			if known && e.Sync.Rev > prev.Rev {
				rp.resyncs++
			}
		case e.Type == "error" || e.Type == "#info":
			t.Fatalf("firehose from cursor 0: %s", e)
		}
	}
	return rp
}
