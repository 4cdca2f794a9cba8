package pds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/plc"
	"github.com/fakepds/fakepds/pds/sequencer"
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
	// The handle is the host as sent, in its case: the reference
	// compares it exactly, so Alice.test is not alice.test here.
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	notFound := func() {
		// As the reference (Express's res.send of a string): HTML, no newline.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("User not found"))
	}
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
	s.handle(x, xrpc.Query, "com.atproto.identity.resolveHandle", noAuth, s.resolveHandle)
	s.registerIdentityWrites(x)
}

func (s *Server) resolveHandle(w http.ResponseWriter, r *http.Request, _ *caller) error {
	handle := strings.ToLower(param(r, "handle"))
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

func (s *Server) registerIdentityWrites(x *xrpc.Mux) {
	handleInput(s, x, "com.atproto.identity.updateHandle", xrpc.JSONLimit, accessStandard, s.updateHandle)
	s.handle(x, xrpc.Query, "com.atproto.identity.getRecommendedDidCredentials", access(scopesStandard, check{}), s.getRecommendedDidCredentials)
	s.handle(x, xrpc.Procedure, "com.atproto.identity.requestPlcOperationSignature", access(append(scopesFull, auth.ScopeTakendown), check{}),
		s.emailTokenRequest(account.PurposePLCOperation, "PLC Update Operation Requested"))
	handleInput(s, x, "com.atproto.identity.signPlcOperation", xrpc.JSONLimit, access(append(scopesFull, auth.ScopeTakendown), check{}), s.signPlcOperation)
	handleInput(s, x, "com.atproto.identity.submitPlcOperation", xrpc.JSONLimit, access(scopesStandard, check{}), s.submitPlcOperation)
}

func (s *Server) updateHandle(w http.ResponseWriter, r *http.Request, c *caller, in *comatproto.IdentityUpdateHandle_Input) error {
	if err := s.setHandle(r.Context(), c.DID, in.Handle); err != nil {
		return err
	}
	return noOutput(w)
}

// setHandle moves did to handle: a PLC operation, the account row, and an
// #identity event, as updateHandle and admin.updateAccountHandle do.
func (s *Server) setHandle(ctx context.Context, did, raw string) error {
	acc, err := s.accounts.ByDID(ctx, did)
	if errors.Is(err, account.ErrNotFound) || err == nil && acc.TakedownRef != "" {
		return xrpc.InvalidRequest("", "Account not found")
	}
	if err != nil {
		return err
	}
	handle, err := s.normalizeHandle(raw, false)
	if err != nil {
		return err
	}
	if !s.isServiceHandle(handle.String()) {
		// Custom domains must resolve to the DID; fakepds has no DNS.
		return xrpc.InvalidRequest("", "External handle did not resolve to DID")
	}
	if other, err := s.accounts.ByHandle(ctx, handle.String()); err == nil && other.DID != did {
		return xrpc.InvalidRequest("HandleNotAvailable", "Handle already taken: %s", handle)
	}
	d := syntax.DID(did)
	if d.Method() == "plc" {
		last, err := s.plc.Last(ctx, d)
		if err != nil {
			return err
		}
		op, err := plc.CreateUpdate(last, s.plcKey, plc.Fields{Handle: handle})
		if err != nil {
			return xrpc.InvalidRequest("", "%v", err)
		}
		if err := s.plc.Submit(ctx, d, op); err != nil {
			return plcError(err)
		}
	}
	if err := s.accounts.UpdateHandle(ctx, did, handle.String()); err != nil {
		return err
	}
	_, err = s.seq.Append(ctx, s.clock.Now(), sequencer.Identity(did, handle.String()))
	return err
}

// serverRotationKey is the did:key of the key that signs every account's
// PLC operations.
func (s *Server) serverRotationKey() string {
	pub, _ := s.plcKey.PublicKey()
	return pub.DIDKey()
}

func (s *Server) getRecommendedDidCredentials(w http.ResponseWriter, r *http.Request, c *caller) error {
	ctx := r.Context()
	key, err := s.signingKey(ctx, c.DID)
	if err != nil {
		return err
	}
	pub, _ := key.PublicKey()
	rotation := []string{}
	if s.cfg.RecoveryDIDKey != "" {
		rotation = append(rotation, s.cfg.RecoveryDIDKey)
	}
	rotation = append(rotation, s.serverRotationKey())
	out := map[string]any{
		"verificationMethods": map[string]string{"atproto": pub.DIDKey()},
		"rotationKeys":        rotation,
		"services": map[string]any{
			"atproto_pds": map[string]string{"type": "AtprotoPersonalDataServer", "endpoint": s.publicURL()},
		},
	}
	if acc, err := s.accounts.ByDID(ctx, c.DID); err == nil && acc.Handle != "" && acc.TakedownRef == "" {
		out["alsoKnownAs"] = []string{"at://" + acc.Handle}
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

type signPlcOperationInput struct {
	Token               *string                     `json:"token"`
	RotationKeys        []string                    `json:"rotationKeys"`
	AlsoKnownAs         []string                    `json:"alsoKnownAs"`
	VerificationMethods map[string]string           `json:"verificationMethods"`
	Services            map[string]didplc.OpService `json:"services"`
}

func (s *Server) signPlcOperation(w http.ResponseWriter, r *http.Request, c *caller, in *signPlcOperationInput) error {
	if in.Token == nil || *in.Token == "" {
		return xrpc.InvalidRequest("", "email confirmation token required to sign PLC operations")
	}
	ctx := r.Context()
	if _, err := s.accounts.CheckEmailToken(ctx, c.DID, account.PurposePLCOperation, *in.Token, s.clock.Now()); err != nil {
		return emailTokenError(err)
	}
	if err := s.accounts.DeleteEmailToken(ctx, c.DID, account.PurposePLCOperation); err != nil {
		return err
	}
	last, err := s.plc.Last(ctx, syntax.DID(c.DID))
	if err != nil {
		return err
	}
	base, ok := last.(*didplc.RegularOp)
	if !ok {
		return xrpc.InvalidRequest("", "Did is tombstoned")
	}
	prev := last.CID().String()
	op := &didplc.RegularOp{
		Type: "plc_operation", Prev: &prev,
		RotationKeys: base.RotationKeys, AlsoKnownAs: base.AlsoKnownAs,
		VerificationMethods: base.VerificationMethods, Services: base.Services,
	}
	if in.RotationKeys != nil {
		op.RotationKeys = in.RotationKeys
	}
	if in.AlsoKnownAs != nil {
		op.AlsoKnownAs = in.AlsoKnownAs
	}
	if in.VerificationMethods != nil {
		op.VerificationMethods = in.VerificationMethods
	}
	if in.Services != nil {
		op.Services = in.Services
	}
	if err := op.Sign(s.plcKey); err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, map[string]any{"operation": op})
	return nil
}

type submitPlcOperationInput struct {
	Operation json.RawMessage `json:"operation"`
}

func (s *Server) submitPlcOperation(w http.ResponseWriter, r *http.Request, c *caller, in *submitPlcOperationInput) error {
	parsed, err := plc.ParseOperation(in.Operation)
	op, isRegular := parsed.(*didplc.RegularOp)
	if err != nil || !isRegular {
		return xrpc.InvalidRequest("", "Invalid operation")
	}
	ctx := r.Context()
	if !slices.Contains(op.RotationKeys, s.serverRotationKey()) {
		return xrpc.InvalidRequest("", "Rotation keys do not include server's rotation key")
	}
	svc, hasPDS := op.Services["atproto_pds"]
	if !hasPDS || svc.Type != "AtprotoPersonalDataServer" {
		return xrpc.InvalidRequest("", "Incorrect type on atproto_pds service")
	}
	if svc.Endpoint != s.publicURL() {
		return xrpc.InvalidRequest("", "Incorrect endpoint on atproto_pds service")
	}
	key, err := s.signingKey(ctx, c.DID)
	if err != nil {
		return err
	}
	pub, _ := key.PublicKey()
	if op.VerificationMethods["atproto"] != pub.DIDKey() {
		return xrpc.InvalidRequest("", "Incorrect signing key")
	}
	if acc, err := s.accounts.ByDID(ctx, c.DID); err == nil && acc.Handle != "" {
		if len(op.AlsoKnownAs) == 0 || op.AlsoKnownAs[0] != "at://"+acc.Handle {
			return xrpc.InvalidRequest("", "Incorrect handle in alsoKnownAs")
		}
	}
	if err := s.plc.Submit(ctx, syntax.DID(c.DID), op); err != nil {
		return plcError(err)
	}
	if _, err := s.seq.Append(ctx, s.clock.Now(), sequencer.Identity(c.DID, "")); err != nil {
		return err
	}
	return noOutput(w)
}
