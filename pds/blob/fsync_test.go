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
)

// TestBlobFsyncSyscalls proves the fsync toggle for blob files at the
// system call level: a child process uploads N blobs under strace, which
// names the file of every fsync/fdatasync. Off, no blob path is synced
// (nor anything else); on, every upload syncs its file and its directory.
func TestBlobFsyncSyscalls(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			dir := t.TempDir()
			report := strace.Child(t, []string{"-y"}, "fsync,fdatasync", "TestBlobFsyncChild",
				[]string{childDirEnv + "=" + dir, childFsyncEnv + "=" + fmt.Sprint(fsync)}, fmt.Sprintf("uploaded %d", childUploads))
			blobDir := filepath.Join(dir, "blobs")
			var all, files, dirs int
			sc := bufio.NewScanner(bytes.NewReader(report))
			for sc.Scan() {
				// One line per call; a call a signal interrupts is cut in
				// two, and only its first half names the file.
				m := syncLine.FindStringSubmatch(sc.Text())
				if m == nil {
					continue
				}
				all++
				rel, err := filepath.Rel(blobDir, m[1])
				switch {
				case err != nil || strings.HasPrefix(rel, ".."):
				case strings.Count(rel, "/") == 2:
					// <hh>/<account>/<blob>: written in place (small) or
					// to a temporary name (large).
					files++
				default:
					dirs++
				}
			}
			t.Logf("%d uploads: %d syncs, %d of blob files, %d of blob directories", childUploads, all, files, dirs)
			if !fsync && all != 0 {
				t.Fatalf("fsync off, yet %d syncs:\n%s", all, report)
			}
			if fsync && (files < childUploads || dirs < childUploads) {
				t.Fatalf("fsync on: %d file and %d directory syncs for %d uploads:\n%s", files, dirs, childUploads, report)
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
