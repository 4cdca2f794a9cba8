package harness

import (
	"context"
	"strings"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/google/uuid"
)

// Account is an account made by NewAccount, with a logged-in client.
type Account struct {
	DID      syntax.DID
	Handle   syntax.Handle
	Email    string
	Password string
	// Client is logged in as the account and refreshes its session when
	// the access token expires.
	Client *atclient.APIClient
}

// AccountOption configures NewAccount.
type AccountOption func(*accountOptions)

type accountOptions struct {
	prefix   string
	handle   string
	email    string
	password string
}

// WithHandlePrefix starts the generated handle with prefix (cut to keep
// the first label within 18 characters), so logs read "alice-3f9a2c1b.test".
func WithHandlePrefix(prefix string) AccountOption {
	return func(o *accountOptions) { o.prefix = prefix }
}

// WithHandle uses exactly this handle instead of a generated one. Tests
// sharing a PDS should not: handles are unique per PDS.
func WithHandle(handle string) AccountOption { return func(o *accountOptions) { o.handle = handle } }

// WithEmail uses this email instead of a generated one.
func WithEmail(email string) AccountOption { return func(o *accountOptions) { o.email = email } }

// WithPassword uses this password instead of a generated one.
func WithPassword(pw string) AccountOption { return func(o *accountOptions) { o.password = pw } }

// NewAccount creates an account through com.atproto.server.createAccount,
// with a handle no other test (in this binary or another sharing the PDS)
// will get, and returns it with a client logged in as it.
func (p *PDS) NewAccount(t testing.TB, opts ...AccountOption) *Account {
	t.Helper()
	o := accountOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	id := strings.ReplaceAll(uuid.NewString(), "-", "")
	if o.handle == "" {
		o.handle = uniqueLabel(o.prefix, id) + p.handleDomain(t)
	}
	if o.email == "" {
		o.email = id[:16] + "@example.com"
	}
	if o.password == "" {
		o.password = "pw-" + id[16:]
	}
	out, err := comatproto.ServerCreateAccount(t.Context(), atclient.NewAPIClient(p.url), &comatproto.ServerCreateAccount_Input{
		Handle: o.handle, Email: &o.email, Password: &o.password,
	})
	if err != nil {
		t.Fatalf("harness.NewAccount(%s): %v", o.handle, err)
	}
	// Resume the session createAccount opened rather than logging in
	// again: one round trip less per account.
	client := atclient.ResumePasswordSession(atclient.PasswordSessionData{
		AccessToken: out.AccessJwt, RefreshToken: out.RefreshJwt, AccountDID: syntax.DID(out.Did), Host: p.url,
	}, nil)
	return &Account{DID: syntax.DID(out.Did), Handle: syntax.Handle(out.Handle), Email: o.email, Password: o.password, Client: client}
}

// uniqueLabel is a handle's first label: the prefix (if any) and enough of
// a random UUID to be unique, within the 18 characters a service handle's
// first label may have.
func uniqueLabel(prefix, id string) string {
	const max, random = 18, 10
	prefix = strings.ToLower(prefix)
	if len(prefix) > max-random-1 {
		prefix = prefix[:max-random-1]
	}
	if prefix == "" {
		return "u" + id[:random]
	}
	return prefix + "-" + id[:random]
}

// handleDomain is the first handle domain the PDS offers, asked once.
func (p *PDS) handleDomain(t testing.TB) string {
	t.Helper()
	p.domainOnce.Do(func() {
		out, err := comatproto.ServerDescribeServer(context.Background(), atclient.NewAPIClient(p.url))
		if err != nil || len(out.AvailableUserDomains) == 0 {
			p.domain = ".test"
			return
		}
		p.domain = out.AvailableUserDomains[0]
	})
	return p.domain
}

// Directory resolves this PDS's handles and DIDs with indigo's identity
// types and no DNS: in-process through the server itself, attached through
// the PDS's resolveHandle and the PLC directory's HTTP API.
func (p *PDS) Directory() identity.Directory {
	if p.srv != nil {
		return p.srv.Directory()
	}
	return &remoteDirectory{pds: atclient.NewAPIClient(p.url), plc: identity.BaseDirectory{PLCURL: p.plcURL}}
}

type remoteDirectory struct {
	pds *atclient.APIClient
	plc identity.BaseDirectory
}

func (d *remoteDirectory) LookupDID(ctx context.Context, did syntax.DID) (*identity.Identity, error) {
	ident, err := d.plc.LookupDID(ctx, did)
	if err != nil {
		return nil, err
	}
	ident.Handle = syntax.HandleInvalid
	if h, err := ident.DeclaredHandle(); err == nil {
		if out, err := comatproto.IdentityResolveHandle(ctx, d.pds, h.String()); err == nil && out.Did == did.String() {
			ident.Handle = h
		}
	}
	return ident, nil
}

func (d *remoteDirectory) LookupHandle(ctx context.Context, h syntax.Handle) (*identity.Identity, error) {
	out, err := comatproto.IdentityResolveHandle(ctx, d.pds, h.String())
	if err != nil {
		return nil, identity.ErrHandleNotFound
	}
	ident, err := d.LookupDID(ctx, syntax.DID(out.Did))
	if err != nil {
		return nil, err
	}
	if ident.Handle != h.Normalize() {
		return nil, identity.ErrHandleMismatch
	}
	return ident, nil
}

func (d *remoteDirectory) Lookup(ctx context.Context, a syntax.AtIdentifier) (*identity.Identity, error) {
	if did, err := a.AsDID(); err == nil {
		return d.LookupDID(ctx, did)
	}
	h, err := a.AsHandle()
	if err != nil {
		return nil, err
	}
	return d.LookupHandle(ctx, h)
}

func (d *remoteDirectory) Purge(context.Context, syntax.AtIdentifier) error { return nil }
