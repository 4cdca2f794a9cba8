package blob_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/internal/strace"
	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/blob"
	"github.com/fakepds/fakepds/pds/store"
)

const (
	childDirEnv   = "FAKEPDS_BLOB_FSYNC_CHILD_DIR"
	childFsyncEnv = "FAKEPDS_BLOB_FSYNC_CHILD_FSYNC"
	childUploads  = 20
	childLarge    = 5 // every fourth: past the in-memory size, so a file
)

// TestBlobFsyncSyscalls proves the fsync toggle for blobs at the system
// call level: a child process uploads N blobs under strace, which names the
// file of every fsync/fdatasync. Off, nothing is synced; on, every upload
// syncs the actor store's WAL (its row, which holds a small blob's bytes)
// and every large one its file and its directory too.
func TestBlobFsyncSyscalls(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			dir := t.TempDir()
			report := strace.Child(t, []string{"-y"}, "fsync,fdatasync", "TestBlobFsyncChild",
				[]string{childDirEnv + "=" + dir, childFsyncEnv + "=" + fmt.Sprint(fsync)}, fmt.Sprintf("uploaded %d", childUploads))
			blobDir := filepath.Join(dir, "blobs")
			var all, files, dirs, wals int
			sc := bufio.NewScanner(bytes.NewReader(report))
			for sc.Scan() {
				// One line per call; a call a signal interrupts is cut in
				// two, and only its first half names the file.
				m := syncLine.FindStringSubmatch(sc.Text())
				if m == nil {
					continue
				}
				all++
				if strings.HasSuffix(m[1], ".sqlite-wal") {
					wals++
				}
				rel, err := filepath.Rel(blobDir, m[1])
				switch {
				case err != nil || strings.HasPrefix(rel, ".."):
				case strings.Count(rel, "/") == 2:
					// <hh>/<account>/<blob>: a large blob's temporary file.
					files++
				default:
					dirs++
				}
			}
			t.Logf("%d uploads (%d large): %d syncs, %d of the actor store's WAL, %d of blob files, %d of blob directories", childUploads, childLarge, all, wals, files, dirs)
			if !fsync && all != 0 {
				t.Fatalf("fsync off, yet %d syncs:\n%s", all, report)
			}
			if fsync && (wals < childUploads || files < childLarge || dirs < childLarge) {
				t.Fatalf("fsync on: %d WAL, %d file and %d directory syncs for %d uploads (%d large):\n%s", wals, files, dirs, childUploads, childLarge, report)
			}
		})
	}
}

// syncLine is an fsync or fdatasync call in strace -y output.
var syncLine = regexp.MustCompile(`\b(?:fsync|fdatasync)\(\d+<([^>]*)>`)

// TestBlobFsyncChild is the child of TestBlobFsyncSyscalls.
func TestBlobFsyncChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestBlobFsyncSyscalls")
	}
	fsync := os.Getenv(childFsyncEnv) == "true"
	db, err := actorstore.Opener(filepath.Join(dir, "actors"), store.Options{Fsync: fsync})(t.Context(), did)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := blob.New(filepath.Join(dir, "blobs"), fsync)
	for i := range childUploads {
		data := fmt.Sprintf("blob %d", i)
		if i%4 == 0 {
			data += strings.Repeat("x", 100<<10) // past the in-memory size
		}
		if _, err := s.Upload(t.Context(), db, blob.Upload{DID: did, Body: strings.NewReader(data),
			MimeType: "text/plain", Limit: 1 << 20, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("uploaded %d\n", childUploads)
}
