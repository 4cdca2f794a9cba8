package repo

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/ipfs/go-cid"
)

// TestCommitCAR: commitCAR's bytes are carBytes's (go-car's header
// encoder), for no block, one, and several of different sizes.
func TestCommitCAR(t *testing.T) {
	var blocks []block
	for _, n := range []int{0, 1, 40, 200, 5000} {
		data := make([]byte, n)
		_, _ = rand.Read(data)
		c, err := cidBuilder.Sum(data)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, block{cid: c, data: data})
	}
	// A commit's CID, and a shorter one (CIDv0) for the byte string's
	// length.
	roots := []cid.Cid{blocks[2].cid, cid.NewCidV0(blocks[3].cid.Hash())}
	for i, root := range roots {
		for n := range len(blocks) + 1 {
			t.Run(fmt.Sprintf("root%d-blocks%d", i, n), func(t *testing.T) {
				want, err := carBytes(root, blocks[:n])
				if err != nil {
					t.Fatal(err)
				}
				if got := commitCAR(root, blocks[:n]); !bytes.Equal(got, want) {
					t.Errorf("commitCAR =\n%x\nwant (go-car)\n%x", got, want)
				}
			})
		}
	}
}
