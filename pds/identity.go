package pds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/plc"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// didDoc is did's DID document from the PLC directory, or nil when it has
// none (unknown, tombstoned, or not a did:plc).
func (s *Server) didDoc(ctx context.Context, did string) *any {
	d, err := syntax.ParseDID(did)
	if err != nil || d.Method() != "plc" {
		return nil
	}
	doc, err := s.plc.Resolve(ctx, d)
	if err != nil {
		return nil
	}
	var v any = doc
	return &v
}

// didDocForSession is the DID document session responses carry, only when
// Config.DIDDocWithSession asks for it, as the reference.
func (s *Server) didDocForSession(ctx context.Context, did string) *any {
	if !s.cfg.DIDDocWithSession {
		return nil
	}
	return s.didDoc(ctx, did)
}

// Directory resolves the handles and DIDs of this PDS with no DNS and no
// HTTP: handles from the account database, DIDs from the PLC directory.
// Code under test takes it where it takes an indigo identity.Directory.
func (s *Server) Directory() identity.Directory { return directory{s} }

type directory struct{ s *Server }

func (d directory) LookupDID(ctx context.Context, did syntax.DID) (*identity.Identity, error) {
	if did.Method() != "plc" {
		return nil, fmt.Errorf("%w: fakepds resolves did:plc only: %s", identity.ErrDIDNotFound, did)
	}
	doc, err := d.s.plc.Resolve(ctx, did)
	if errors.Is(err, plc.ErrNotFound) || errors.Is(err, plc.ErrTombstoned) {
		return nil, fmt.Errorf("%w: %s", identity.ErrDIDNotFound, did)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", identity.ErrDIDResolutionFailed, err)
	}
	ident := doc.Identity()
	// The handle is verified the way a resolver would: the declared
	// handle must map back to this DID. Here the account database is the
	// authority both ways.
	ident.Handle = syntax.HandleInvalid
	if h, err := ident.DeclaredHandle(); err == nil {
		if acc, err := d.s.accounts.ByHandle(ctx, h.String()); err == nil && acc.DID == did.String() && acc.Active() {
			ident.Handle = h
		}
	}
	return &ident, nil
}

func (d directory) LookupHandle(ctx context.Context, h syntax.Handle) (*identity.Identity, error) {
	acc, err := d.s.accounts.ByHandle(ctx, h.Normalize().String())
	if errors.Is(err, account.ErrNotFound) || err == nil && !acc.Active() {
		return nil, fmt.Errorf("%w: %s", identity.ErrHandleNotFound, h)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", identity.ErrHandleResolutionFailed, err)
	}
	ident, err := d.LookupDID(ctx, syntax.DID(acc.DID))
	if err != nil {
		return nil, err
	}
	if ident.Handle != h.Normalize() {
		return nil, identity.ErrHandleMismatch
	}
	return ident, nil
}

func (d directory) Lookup(ctx context.Context, a syntax.AtIdentifier) (*identity.Identity, error) {
	if did, err := a.AsDID(); err == nil {
		return d.LookupDID(ctx, did)
	}
	h, err := a.AsHandle()
	if err != nil {
		return nil, err
	}
	return d.LookupHandle(ctx, h)
}

// Purge has nothing to do: nothing is cached.
func (d directory) Purge(context.Context, syntax.AtIdentifier) error { return nil }

// resolveLocalHandle finds the DID of an active local account's handle.
func (s *Server) resolveLocalHandle(ctx context.Context, handle string) (string, bool, error) {
	acc, err := s.accounts.ByHandle(ctx, handle)
	if errors.Is(err, account.ErrNotFound) || err == nil && !acc.Active() {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return acc.DID, true, nil
}

// isServiceHandle reports whether handle is under (or is) one of the
// server's handle domains.
func (s *Server) isServiceHandle(handle string) bool {
	for _, d := range s.cfg.HandleDomains {
		if strings.HasSuffix(handle, d) || handle == d[1:] {
			return true
		}
	}
	return false
}

// wellKnownDID serves /.well-known/atproto-did for the handle named by the
// Host header, as the reference: the DID as plain text, or 404.
func (s *Server) wellKnownDID(w http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	notFound := func() { http.Error(w, "User not found", http.StatusNotFound) }
	if !s.isServiceHandle(host) {
		notFound()
		return
	}
	did, ok, err := s.resolveLocalHandle(r.Context(), host)
	if err != nil {
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	if !ok {
		notFound()
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(did))
}

func (s *Server) registerIdentity(x *xrpc.Mux) {
	x.Handle(xrpc.Query, "com.atproto.identity.resolveHandle", s.resolveHandle)
}

func (s *Server) resolveHandle(w http.ResponseWriter, r *http.Request) error {
	const nsid = "com.atproto.identity.resolveHandle"
	raw := r.URL.Query().Get("handle")
	if raw == "" {
		return xrpc.MissingParam(nsid, "handle")
	}
	if _, err := syntax.ParseHandle(raw); err != nil {
		return xrpc.InvalidRequest("", "Invalid %s params: Invalid handle (got %q)", nsid, raw)
	}
	handle := strings.ToLower(raw)
	did, ok, err := s.resolveLocalHandle(r.Context(), handle)
	if err != nil {
		return err
	}
	if ok {
		xrpc.WriteJSON(w, http.StatusOK, map[string]string{"did": did})
		return nil
	}
	if s.isServiceHandle(handle) {
		return xrpc.InvalidRequest("HandleNotFound", "Unable to resolve handle")
	}
	// The reference asks its appview or DNS next; fakepds knows only its
	// own accounts (docs/known-differences.md).
	return xrpc.InvalidRequest("", "Unable to resolve handle")
}
