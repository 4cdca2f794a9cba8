package repo_test

import (
	"fmt"
	"testing"

	"github.com/bluesky-social/indigo/atproto/repo/mst"
)

// A repo emptied by a delete grows again as a canonical tree. indigo leaves
// an emptied root at the height of the key removed; a write starting from
// it (the Writer's kept tree, or the next write of the same applyWrites)
// hung the next records under a pointer-only root: a data root no other
// implementation computes, and #commits whose ops no longer invert to
// their prevData. Found by internal/reliability's load.
func TestEmptiedRepoGrowsCanonical(t *testing.T) {
	high, low := keysByHeight(t)
	for _, kept := range []bool{false, true} {
		t.Run(fmt.Sprintf("kept=%v", kept), func(t *testing.T) {
			f := newFixture(t, "")
			if kept {
				f = f.withWriter()
			}
			// checkRepo compares the data root with a tree built afresh
			// from the same records.
			f.mustApply(create(t, high, "high"))
			f.mustApply(del(high))
			f.mustApply(create(t, low[0], "a"))
			f.checkRepo()
			f.mustApply(create(t, low[1], "b"))
			f.checkRepo()
			// Emptied and grown again within one commit.
			f.mustApply(del(low[0]), del(low[1]), create(t, high, "again"))
			f.mustApply(del(high), create(t, low[2], "c"))
			if n := len(f.checkRepo()); n != 1 {
				t.Fatalf("repo holds %d records, want 1", n)
			}
		})
	}
}

// keysByHeight picks an rkey whose path sits above the MST's bottom layer
// and three on it.
func keysByHeight(t *testing.T) (string, []string) {
	var high string
	var low []string
	for i := 0; high == "" || len(low) < 3; i++ {
		rkey := fmt.Sprintf("k%04d", i)
		switch mst.HeightForKey([]byte(posts.String() + "/" + rkey)) {
		case 0:
			low = append(low, rkey)
		default:
			if high == "" {
				high = rkey
			}
		}
	}
	return high, low[:3]
}
