package pds

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// Large request bodies are read to a file under the data dir before the
// request takes anything shared: a client sending slowly (or not at all)
// then holds its own goroutine, socket and file, never an actor store or
// an import slot that other requests wait for. Blobs are staged by package
// blob in their account's directory; importRepo's CAR goes to tmp/.

// tmpDir is where request bodies are spooled; New removes it, since a
// file left there belongs to a request of a process that is gone, and the
// first spool makes it again (a start makes no directory most runs never
// use).
func (s *Server) tmpDir() string { return filepath.Join(s.dataDir, "tmp") }

func (s *Server) resetTmpDir() error {
	if err := os.RemoveAll(s.tmpDir()); err != nil {
		return fmt.Errorf("tmp dir: %w", err)
	}
	return nil
}

// spoolImport reads importRepo's body (its Content-Encoding undone, as the
// reference does) to a temporary file, at most maxImportSize bytes.
func (s *Server) spoolImport(r *http.Request) (*repo.CAR, error) {
	body, err := xrpc.DecodedBody(r)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.tmpDir(), 0o700); err != nil {
		return nil, fmt.Errorf("tmp dir: %w", err)
	}
	car, err := repo.SpoolCAR(body, s.tmpDir(), maxImportSize)
	switch {
	case errors.Is(err, repo.ErrCARTooLarge):
		return nil, xrpc.PayloadTooLarge()
	case errors.Is(err, repo.ErrCARRead) && errors.Is(err, os.ErrDeadlineExceeded):
		return nil, xrpc.ReadError(err)
	}
	// Anything else, a body that does not decode included, is for the
	// caller's error mapping (the reference answers unreadable CARs 500).
	return car, err
}

// importSlot waits for one of the Config.ImportConcurrency slots of
// importRepo, at most Config.SlotWait: each import holds its CAR's block
// index and tree in memory while it runs, so only so many run at once.
func (s *Server) importSlot(ctx context.Context) (release func(), err error) {
	var timeout <-chan time.Time
	if s.cfg.SlotWait > 0 {
		t := time.NewTimer(s.cfg.SlotWait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case s.imports <- struct{}{}:
		return func() { <-s.imports }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timeout:
		return nil, xrpc.Errorf(http.StatusServiceUnavailable, "NotEnoughResources", "too many repo imports at once; try again")
	}
}
