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

// Account is an account on a PDS (made by NewAccount, logged in with
// Login, or a fixture's), with a logged-in client.
type Account struct {
	DID      syntax.DID
	Handle   syntax.Handle
	Email    string
	Password string
	// Client is logged in as the account and refreshes its session when
	// the access token expires.
	Client *atclient.APIClient

	pds *PDS
}

// AccountOption configures NewAccount.
type AccountOption func(*accountOptions)

type accountOptions struct {
	prefix   string
	handle   string
	email    string
	password string
	invite   string
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

// WithInviteCode creates the account with this invite code. Without it,
// on a PDS that requires invites (WithInvites), NewAccount mints a
// single-use code with the admin password (InviteCode).
func WithInviteCode(code string) AccountOption { return func(o *accountOptions) { o.invite = code } }

// NewAccount creates an account through com.atproto.server.createAccount,
// with a handle no other test (in this binary or another sharing the PDS)
// will get, and returns it with a client logged in as it.
func (p *PDS) NewAccount(t testing.TB, opts ...AccountOption) *Account {
	t.Helper()
	p.alive(t, "NewAccount")
	o := accountOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	u, err := uuid.NewRandomFromReader(p.random())
	if err != nil {
		t.Fatalf("harness.NewAccount: %v", err)
	}
	id := strings.ReplaceAll(u.String(), "-", "")
	if o.handle == "" {
		o.handle = uniqueLabel(o.prefix, id) + p.handleDomain(t)
	}
	if o.email == "" {
		o.email = id[:16] + "@example.com"
	}
	if o.password == "" {
		o.password = "pw-" + id[16:]
	}
	in := &comatproto.ServerCreateAccount_Input{Handle: o.handle, Email: &o.email, Password: &o.password}
	if o.invite == "" && p.invitesRequired(t) {
		o.invite = p.InviteCode(t)
	}
	if o.invite != "" {
		in.InviteCode = &o.invite
	}
	out, err := comatproto.ServerCreateAccount(t.Context(), p.Client(), in)
	if err != nil {
		t.Fatalf("harness.NewAccount(%s): %v", o.handle, err)
	}
	// Resume the session createAccount opened rather than logging in
	// again: one round trip less per account.
	return p.account(syntax.DID(out.Did), syntax.Handle(out.Handle), o.email, o.password, out.AccessJwt, out.RefreshJwt)
}

func (p *PDS) account(did syntax.DID, handle syntax.Handle, email, password, access, refresh string) *Account {
	client := atclient.ResumePasswordSession(atclient.PasswordSessionData{
		AccessToken: access, RefreshToken: refresh, AccountDID: did, Host: p.url,
	}, nil)
	return &Account{DID: did, Handle: handle, Email: email, Password: password, Client: client, pds: p}
}

// Login logs in to an account made some other way (by the code under
// test, by hand with createAccount) with its handle, email or DID and
// password, and returns it as an *Account for the seed helpers.
func (p *PDS) Login(t testing.TB, identifier, password string) *Account {
	t.Helper()
	p.alive(t, "Login")
	out, err := comatproto.ServerCreateSession(t.Context(), p.Client(), &comatproto.ServerCreateSession_Input{Identifier: identifier, Password: password})
	if err != nil {
		t.Fatalf("harness.Login(%s): %v", identifier, err)
	}
	email := ""
	if out.Email != nil {
		email = *out.Email
	}
	return p.account(syntax.DID(out.Did), syntax.Handle(out.Handle), email, password, out.AccessJwt, out.RefreshJwt)
}

// InviteCode mints a single-use invite code with the admin password
// (com.atproto.server.createInviteCode).
func (p *PDS) InviteCode(t testing.TB) string {
	t.Helper()
	p.alive(t, "InviteCode")
	out, err := comatproto.ServerCreateInviteCode(t.Context(), p.AdminClient(), &comatproto.ServerCreateInviteCode_Input{UseCount: 1})
	if err != nil {
		t.Fatalf("harness.InviteCode: %v", err)
	}
	return out.Code
}

// Client is an anonymous client of the PDS: public queries,
// createAccount, createSession.
func (p *PDS) Client() *atclient.APIClient { return atclient.NewAPIClient(p.url) }

// AdminClient is a client of the PDS with the admin's HTTP Basic
// credentials: com.atproto.admin.*, createInviteCode.
func (p *PDS) AdminClient() *atclient.APIClient {
	return atclient.NewAdminClient(p.url, p.adminPassword)
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
	p.describe()
	return p.domain
}

// invitesRequired says whether createAccount needs an invite code.
func (p *PDS) invitesRequired(t testing.TB) bool {
	t.Helper()
	p.describe()
	return p.invites
}

// describe asks describeServer once what NewAccount needs to know.
func (p *PDS) describe() {
	p.domainOnce.Do(func() {
		p.domain = ".test"
		out, err := comatproto.ServerDescribeServer(context.Background(), p.Client())
		if err != nil {
			return
		}
		if len(out.AvailableUserDomains) > 0 {
			p.domain = out.AvailableUserDomains[0]
		}
		p.invites = out.InviteCodeRequired != nil && *out.InviteCodeRequired
	})
}

// Directory resolves this PDS's handles and DIDs with indigo's identity
// types and no DNS: in-process through the server itself, attached through
// the PDS's resolveHandle and the PLC directory's HTTP API.
func (p *PDS) Directory() identity.Directory {
	if p.srv != nil {
		return p.srv.Directory()
	}
	return &remoteDirectory{pds: atclient.NewAPIClient(p.url), plc: identity.BaseDirectory{PLCURL: p.plcURL, SkipHandleVerification: true}}
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
