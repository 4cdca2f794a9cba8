package repo

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	car "github.com/ipld/go-car"
	carutil "github.com/ipld/go-car/util"
)

// ErrCARTooLarge: SpoolCAR's body passed its limit.
var ErrCARTooLarge = errors.New("repo: CAR larger than the import limit")

// ErrCARRead wraps an error reading SpoolCAR's body (the client's).
var ErrCARRead = errors.New("repo: reading the CAR")

// CAR is an importRepo body in a temporary file, so that memory holds no
// more of it than an index of its blocks (CID, offset and length, some
// 100 bytes a block) and, while Import runs, its MST nodes. SpoolCAR
// copies the body in without parsing past the header; Index then reads
// the blocks once, checking each against its CID. Close removes the file.
type CAR struct {
	f      *os.File
	root   cid.Cid
	blocks map[cid.Cid]span // after Index
}

type span struct{ off, n int64 }

// SpoolCAR copies r, a CAR of at most limit bytes, to a temporary file in
// dir. It reads the header first, so a body that is no CAR fails at its
// first bytes (ErrUnreadableRepo), one without exactly one root too
// (ErrInvalidRepo); the blocks are not read until Index.
func SpoolCAR(r io.Reader, dir string, limit int64) (*CAR, error) {
	f, err := os.CreateTemp(dir, ".import-*")
	if err != nil {
		return nil, fmt.Errorf("repo: import: %w", err)
	}
	c := &CAR{f: f}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	body := &countingReader{r: io.LimitReader(r, limit+1)}
	// Everything read from the body goes to the file, header included.
	br := bufio.NewReader(io.TeeReader(body, f))
	hdr, err := car.ReadHeader(br)
	if err != nil {
		if body.err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCARRead, body.err)
		}
		return nil, fmt.Errorf("%w: %v", ErrUnreadableRepo, err)
	}
	// The reference reads the header, checks its roots, then the blocks.
	if len(hdr.Roots) != 1 {
		return nil, fmt.Errorf("%w: expected one root", ErrInvalidRepo)
	}
	if hdr.Version != 1 {
		return nil, fmt.Errorf("%w: invalid car version: %d", ErrUnreadableRepo, hdr.Version)
	}
	c.root = hdr.Roots[0]
	if _, err := io.Copy(f, body); err != nil {
		if body.err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCARRead, body.err)
		}
		return nil, fmt.Errorf("repo: import: %w", err)
	}
	if body.n > limit {
		return nil, ErrCARTooLarge
	}
	ok = true
	return c, nil
}

// countingReader counts what it reads and keeps its reader's error, so a
// failed read of the client's body is told from a malformed CAR.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// Index reads every block of the CAR once, checking that it hashes to its
// CID, and records where it is. A CAR that does not read to its end is
// ErrUnreadableRepo, as in the reference.
func (c *CAR) Index() error {
	if _, err := c.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("repo: import: %w", err)
	}
	pos := &countingReader{r: c.f}
	br := bufio.NewReader(pos)
	if _, err := car.ReadHeader(br); err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadableRepo, err)
	}
	c.blocks = make(map[cid.Cid]span)
	var buf []byte // one section at a time, reused: the index allocates no block
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return nil
		}
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnreadableRepo, err)
		}
		if n > uint64(carutil.MaxAllowedSectionSize) {
			return fmt.Errorf("%w: section of %d bytes", ErrUnreadableRepo, n)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("%w: %v", ErrUnreadableRepo, err)
		}
		idLen, id, err := cid.CidFromBytes(buf)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnreadableRepo, err)
		}
		data := buf[idLen:]
		sum, err := id.Prefix().Sum(data)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnreadableRepo, err)
		}
		if !sum.Equals(id) {
			return fmt.Errorf("%w: mismatch in content integrity, name: %s, data: %s", ErrUnreadableRepo, id, sum)
		}
		// The block's data ends where the reader now stands.
		end := pos.n - int64(br.Buffered())
		c.blocks[id] = span{off: end - int64(len(data)), n: int64(len(data))}
	}
}

// Root is the CID the CAR's header names.
func (c *CAR) Root() cid.Cid { return c.root }

// Len is the number of distinct blocks Index found.
func (c *CAR) Len() int { return len(c.blocks) }

// Get reads a block from the file: ipld's ErrNotFound when the CAR does
// not hold it. It is what indigo's MST loader reads the tree through.
func (c *CAR) Get(_ context.Context, id cid.Cid) (blocks.Block, error) {
	data, err := c.data(id)
	if err != nil {
		return nil, err
	}
	if data == nil {
		return nil, &ipld.ErrNotFound{Cid: id}
	}
	return blocks.NewBlockWithCid(data, id)
}

// data is the bytes of block id, nil when the CAR does not hold it.
func (c *CAR) data(id cid.Cid) ([]byte, error) {
	s, ok := c.blocks[id]
	if !ok {
		return nil, nil
	}
	b := make([]byte, s.n)
	if _, err := c.f.ReadAt(b, s.off); err != nil {
		return nil, fmt.Errorf("repo: import: %w", err)
	}
	return b, nil
}

// Close removes the file.
func (c *CAR) Close() error {
	err := c.f.Close()
	if rerr := os.Remove(c.f.Name()); err == nil {
		err = rerr
	}
	return err
}
