package pds

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/jsvalue"
	"github.com/fakepds/fakepds/pds/mail"
	"github.com/fakepds/fakepds/pds/plc"
	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// The reference serves neither com.atproto.admin.searchAccounts nor
// updateAccountSigningKey itself (its proxy catch-all takes them); they
// stay unregistered here.

// registerAdmin adds the com.atproto.admin.* methods.
func (s *Server) registerAdmin(x *xrpc.Mux) {
	s.handle(x, xrpc.Query, nsidGetAccountInfo, moderator, s.adminGetAccountInfo)
	s.handle(x, xrpc.Query, nsidGetAccountInfos, moderator, s.adminGetAccountInfos)
	s.handle(x, xrpc.Procedure, nsidUpdateSubjectStatus, moderator, s.adminUpdateSubjectStatus)
	s.handle(x, xrpc.Query, nsidGetSubjectStatus, moderator, s.adminGetSubjectStatus)
	s.handle(x, xrpc.Procedure, "com.atproto.admin.updateAccountHandle", adminAuth, s.adminUpdateAccountHandle)
	s.handle(x, xrpc.Procedure, "com.atproto.admin.updateAccountEmail", adminAuth, s.adminUpdateAccountEmail)
	s.handle(x, xrpc.Procedure, "com.atproto.admin.updateAccountPassword", adminAuth, s.adminUpdateAccountPassword)
	s.handle(x, xrpc.Procedure, "com.atproto.admin.deleteAccount", adminAuth, s.adminDeleteAccount)
	s.handle(x, xrpc.Procedure, nsidSendEmail, moderator, s.adminSendEmail)
	s.handle(x, xrpc.Procedure, nsidDisableAccountInvites, moderator, s.adminSetAccountInvites(true))
	s.handle(x, xrpc.Procedure, nsidEnableAccountInvites, moderator, s.adminSetAccountInvites(false))
	s.handle(x, xrpc.Procedure, nsidDisableInviteCodes, moderator, s.adminDisableInviteCodes)
	s.handle(x, xrpc.Query, nsidGetInviteCodes, moderator, s.adminGetInviteCodes)
}

const (
	nsidGetAccountInfo        = "com.atproto.admin.getAccountInfo"
	nsidGetAccountInfos       = "com.atproto.admin.getAccountInfos"
	nsidUpdateSubjectStatus   = "com.atproto.admin.updateSubjectStatus"
	nsidGetSubjectStatus      = "com.atproto.admin.getSubjectStatus"
	nsidSendEmail             = "com.atproto.admin.sendEmail"
	nsidDisableAccountInvites = "com.atproto.admin.disableAccountInvites"
	nsidEnableAccountInvites  = "com.atproto.admin.enableAccountInvites"
	nsidDisableInviteCodes    = "com.atproto.admin.disableInviteCodes"
	nsidGetInviteCodes        = "com.atproto.admin.getInviteCodes"

	typeRepoRef     = "com.atproto.admin.defs#repoRef"
	typeStrongRef   = "com.atproto.repo.strongRef"
	typeRepoBlobRef = "com.atproto.admin.defs#repoBlobRef"
)

// ---------------------------------------------------------------- auth

// moderator is the reference's moderator verifier. A Bearer token must be a
// service token from the configured moderation service; fakepds has none,
// so a well-formed one ends at UntrustedIss, after the same structural
// checks in the same order. Any other scheme must be the admin's Basic
// credentials.
func (s *Server) moderator(r *http.Request, nsid string) error {
	scheme, token, err := authHeader(r)
	if err != nil {
		return err
	}
	if scheme != "BEARER" {
		return s.admin(r)
	}
	return s.modServiceAuth(token, nsid)
}

var errBadJwt = xrpc.AuthRequired("BadJwt", "poorly formatted jwt")

// modServiceAuth checks a service JWT as the reference's xrpc-server does
// before it looks up the issuer's key.
func (s *Server) modServiceAuth(token, nsid string) error {
	if token == "" {
		return xrpc.AuthRequired("MissingJwt", "missing jwt")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errBadJwt
	}
	hdr, err := jwtSegment(parts[0])
	if err != nil {
		return err
	}
	if _, ok := hdr["alg"].(string); hdr == nil || !ok {
		return errBadJwt
	}
	if typ, _ := hdr["typ"].(string); typ == auth.TypeAccess || typ == auth.TypeRefresh || typ == "dpop+jwt" {
		return xrpc.AuthRequired("BadJwtType", "Invalid jwt type %q", typ)
	}
	p, err := jwtSegment(parts[1])
	if err != nil {
		return err
	}
	iss, issOK := p["iss"].(string)
	_, audOK := p["aud"].(string)
	exp, expOK := p["exp"].(float64)
	if p == nil || !issOK || !audOK || !expOK || !stringOrFalsy(p["lxm"]) || !stringOrFalsy(p["nonce"]) {
		return errBadJwt
	}
	if float64(s.clock.Now().UnixMilli())/1000 > exp {
		return xrpc.AuthRequired("JwtExpired", "jwt expired")
	}
	if lxm, present := p["lxm"]; lxm != nsid {
		if present {
			return xrpc.AuthRequired("BadJwtLexiconMethod", `bad jwt lexicon method ("lxm"). must match: %s`, nsid)
		}
		return xrpc.AuthRequired("BadJwtLexiconMethod", `missing jwt lexicon method ("lxm"). must match: %s`, nsid)
	}
	did, frag, hasFrag := strings.Cut(iss, "#")
	if _, err := syntax.ParseDID(did); err != nil || hasFrag && (frag == "" || strings.Contains(frag, "#")) {
		return xrpc.AuthRequired("BadJwtIss", "jwt iss is not a valid did")
	}
	return xrpc.AuthRequired("UntrustedIss", "Untrusted issuer")
}

// jwtSegment decodes a JWT header or payload: nil when it is JSON but not
// an object; a 500 when it is not JSON at all, as in the reference, whose
// JSON.parse throws a plain error there.
func jwtSegment(seg string) (map[string]any, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return nil, fmt.Errorf("jwt segment: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("jwt segment: %w", err)
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// stringOrFalsy: the reference refuses a claim that is truthy but not a
// string.
func stringOrFalsy(v any) bool {
	switch v := v.(type) {
	case nil, string:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	}
	return false
}

// ---------------------------------------------------------------- account views

// adminAccountView is com.atproto.admin.defs#accountView, as the reference
// fills it: invites is always an array, invitesDisabled always a boolean.
type adminAccountView struct {
	DID              string                              `json:"did"`
	Handle           string                              `json:"handle"`
	Email            string                              `json:"email,omitempty"`
	IndexedAt        string                              `json:"indexedAt"`
	EmailConfirmedAt string                              `json:"emailConfirmedAt,omitempty"`
	InvitedBy        *comatproto.ServerDefs_InviteCode   `json:"invitedBy,omitempty"`
	Invites          []*comatproto.ServerDefs_InviteCode `json:"invites"`
	InvitesDisabled  bool                                `json:"invitesDisabled"`
	DeactivatedAt    string                              `json:"deactivatedAt,omitempty"`
}

// accountViews builds the views of the accounts of dids that exist, in the
// reference's order (by DID).
func (s *Server) accountViews(ctx context.Context, dids []string) ([]adminAccountView, error) {
	accs, err := s.accounts.ByDIDs(ctx, dids)
	if err != nil {
		return nil, err
	}
	invites, err := s.accounts.InviteCodesFor(ctx, dids)
	if err != nil {
		return nil, err
	}
	invitedBy, err := s.accounts.InvitedBy(ctx, dids)
	if err != nil {
		return nil, err
	}
	views := make([]adminAccountView, 0, len(accs))
	for _, a := range accs {
		v := adminAccountView{
			DID: a.DID, Handle: handleOrInvalid(a), Email: a.Email, IndexedAt: a.CreatedAt,
			EmailConfirmedAt: a.EmailConfirmedAt, InvitesDisabled: a.InvitesDisabled, DeactivatedAt: a.DeactivatedAt,
			Invites: []*comatproto.ServerDefs_InviteCode{},
		}
		if ic, ok := invitedBy[a.DID]; ok {
			v.InvitedBy = inviteView(ic)
		}
		for _, ic := range invites[a.DID] {
			v.Invites = append(v.Invites, inviteView(ic))
		}
		views = append(views, v)
	}
	return views, nil
}

func (s *Server) adminGetAccountInfo(w http.ResponseWriter, r *http.Request, _ *caller) error {
	p := lexParams{nsidGetAccountInfo, r}
	did, err := p.str("did", true, "did")
	if err != nil {
		return err
	}
	views, err := s.accountViews(r.Context(), []string{did})
	if err != nil {
		return err
	}
	if len(views) == 0 {
		return xrpc.InvalidRequest("NotFound", "Account not found")
	}
	xrpc.WriteJSON(w, http.StatusOK, views[0])
	return nil
}

func (s *Server) adminGetAccountInfos(w http.ResponseWriter, r *http.Request, _ *caller) error {
	p := lexParams{nsidGetAccountInfos, r}
	dids, err := p.strs("dids", true, "did")
	if err != nil {
		return err
	}
	views, err := s.accountViews(r.Context(), dids)
	if err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, map[string]any{"infos": views})
	return nil
}

// ---------------------------------------------------------------- subject status

// statusAttr is com.atproto.admin.defs#statusAttr.
type statusAttr struct {
	Applied bool    `json:"applied"`
	Ref     *string `json:"ref,omitempty"`
}

func attrOf(ref string) *statusAttr {
	if ref == "" {
		return &statusAttr{}
	}
	return &statusAttr{Applied: true, Ref: &ref}
}

// subjectRef is the updateSubjectStatus subject, as checked.
type subjectRef struct {
	typ string
	did string // repoRef, repoBlobRef
	uri syntax.ATURI
	cid string // strongRef, repoBlobRef
	raw json.RawMessage
}

// parseSubject checks the subject union as the reference's lexicon
// validator does: an object with a string $type; the known types' fields
// checked, unknown types passed through.
func parseSubject(in *lexObject) (*subjectRef, error) {
	raw, ok := in.m["subject"]
	if !ok {
		return nil, lexIssue(in.path, `Missing required key "subject"`)
	}
	path := in.path + pathKey("subject")
	obj, err := lexObjectAt(raw, path)
	if err != nil || obj.m["$type"] == nil {
		return nil, lexIssue(path, `Expected an object which includes the "$type" property value type (got %s)`, jsvalue.PreviewJSON(raw))
	}
	typ, _, err := obj.str("$type", true, "")
	if err != nil {
		return nil, err
	}
	sub := &subjectRef{typ: typ, raw: raw}
	switch typ {
	case typeRepoRef:
		sub.did, _, err = obj.str("did", true, "did")
	case typeStrongRef:
		var uri string
		if uri, _, err = obj.str("uri", true, "at-uri"); err == nil {
			sub.uri = syntax.ATURI(uri)
			sub.cid, _, err = obj.str("cid", true, "cid")
		}
	case typeRepoBlobRef:
		if sub.did, _, err = obj.str("did", true, "did"); err == nil {
			if sub.cid, _, err = obj.str("cid", true, "cid"); err == nil {
				_, _, err = obj.str("recordUri", false, "at-uri")
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// parseStatusAttr checks an optional statusAttr property.
func parseStatusAttr(in *lexObject, key string) (*statusAttr, json.RawMessage, error) {
	obj, ok, err := in.object(key, false)
	if err != nil || !ok {
		return nil, nil, err
	}
	applied, _, err := obj.boolean("applied", true)
	if err != nil {
		return nil, nil, err
	}
	ref, hasRef, err := obj.str("ref", false, "")
	if err != nil {
		return nil, nil, err
	}
	a := &statusAttr{Applied: applied}
	if hasRef {
		a.Ref = &ref
	}
	return a, in.m[key], nil
}

func (s *Server) adminUpdateSubjectStatus(w http.ResponseWriter, r *http.Request, _ *caller) error {
	in, err := decodeLexInput(r)
	if err != nil {
		return err
	}
	sub, err := parseSubject(in)
	if err != nil {
		return err
	}
	takedown, rawTakedown, err := parseStatusAttr(in, "takedown")
	if err != nil {
		return err
	}
	deactivated, _, err := parseStatusAttr(in, "deactivated")
	if err != nil {
		return err
	}
	if takedown != nil && takedown.Applied && deactivated != nil && !deactivated.Applied {
		return xrpc.InvalidRequest("", "Cannot activate and takedown an account at the same time")
	}
	ctx := r.Context()
	if takedown != nil {
		// The reference stores the ref given, or the time, when applied.
		ref := ""
		if takedown.Applied {
			ref = account.FormatTime(s.clock.Now())
			if takedown.Ref != nil && *takedown.Ref != "" {
				ref = *takedown.Ref
			}
		}
		switch sub.typ {
		case typeRepoRef:
			err = s.takedownAccount(ctx, sub.did, ref)
		case typeStrongRef:
			err = s.takedownRecord(ctx, sub.uri, ref)
		case typeRepoBlobRef:
			err = s.takedownBlob(ctx, sub.did, sub.cid, ref)
		default:
			err = xrpc.InvalidRequest("", "Invalid subject (%s)", sub.typ)
		}
		if err != nil {
			return err
		}
	}
	if deactivated != nil && sub.typ == typeRepoRef {
		if deactivated.Applied {
			err = s.adminDeactivate(ctx, sub.did)
		} else {
			err = s.adminActivate(ctx, sub.did)
		}
		if err != nil {
			return err
		}
	}
	if takedown == nil && deactivated == nil && sub.typ == typeRepoRef {
		// Historically this method always sequences the account's status.
		if err := s.sequenceAccountStatus(ctx, sub.did); err != nil {
			return err
		}
	}
	xrpc.WriteJSON(w, http.StatusOK, struct {
		Subject  json.RawMessage `json:"subject"`
		Takedown json.RawMessage `json:"takedown,omitempty"`
	}{sub.raw, rawTakedown})
	return nil
}

// takedownAccount sets or clears (ref "") did's takedown, revokes its
// refresh tokens, and sequences its new status (deleted if it has no
// account), as the reference does.
func (s *Server) takedownAccount(ctx context.Context, did, ref string) error {
	if err := s.accounts.SetTakedownRevoking(ctx, did, ref); err != nil {
		return err
	}
	return s.sequenceAccountStatus(ctx, did)
}

// sequenceAccountStatus emits did's current #account status.
func (s *Server) sequenceAccountStatus(ctx context.Context, did string) error {
	status := string(account.StatusDeleted)
	acc, err := s.accounts.ByDID(ctx, did)
	switch {
	case err == nil:
		status = statusOf(acc)
	case !errors.Is(err, account.ErrNotFound):
		return err
	}
	_, err = s.seq.Append(ctx, s.clock.Now(), sequencer.Account(did, status))
	return err
}

func (s *Server) adminDeactivate(ctx context.Context, did string) error {
	err := s.accounts.Deactivate(ctx, did, s.clock.Now(), time.Time{})
	if errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("", "Account not found")
	}
	if err != nil {
		return err
	}
	return s.sequenceAccountStatus(ctx, did)
}

// adminActivate is activateAccount for the admin: the DID document must
// point here, a taken-down account cannot be activated, and it emits the
// three activation events.
func (s *Server) adminActivate(ctx context.Context, did string) error {
	if d, err := syntax.ParseDID(did); err == nil && d.Method() == "plc" {
		// The reference asks the PLC directory first and passes its
		// refusal on.
		switch _, err := s.plc.Data(ctx, d); {
		case errors.Is(err, plc.ErrNotFound):
			return xrpc.InvalidRequest("", "DID not registered: %s", did)
		case errors.Is(err, plc.ErrTombstoned):
			return xrpc.InvalidRequest("", "DID not available: %s", did)
		}
	}
	if p := s.didDocProblem(ctx, did); p != "" {
		return xrpc.InvalidRequest("", "%s", p)
	}
	acc, err := s.accounts.ByDID(ctx, did)
	if errors.Is(err, account.ErrNotFound) || err == nil && acc.TakedownRef != "" {
		return xrpc.InvalidRequest("AccountNotFound", "user not found")
	}
	if err != nil {
		return err
	}
	if err := s.accounts.Activate(ctx, did); err != nil {
		return err
	}
	acc.DeactivatedAt, acc.DeleteAfter = "", ""
	return s.sequenceActivation(ctx, acc)
}

// errNoRepo is an actor store that does not exist.
var errNoRepo = errors.New("pds: repo not found")

// withExistingActor runs fn on did's actor store, errNoRepo when did has
// none (without creating one, as Acquire would).
func (s *Server) withExistingActor(ctx context.Context, did string, fn func(db *store.DB) error) error {
	if _, err := syntax.ParseDID(did); err != nil {
		// A handle in an at:// URI: the reference fails to open a store
		// named by it, a 500.
		return fmt.Errorf("pds: actor store of %q: not a DID", did)
	}
	if _, err := os.Stat(actorstore.Path(s.actorDir(), did)); err != nil {
		return errNoRepo
	}
	return s.withActor(ctx, did, fn)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// takedownRecord sets or clears a record's takedown; a record that does not
// exist is not an error, a repo that does not exist is a 500, as in the
// reference.
func (s *Server) takedownRecord(ctx context.Context, uri syntax.ATURI, ref string) error {
	return s.withExistingActor(ctx, uri.Authority().String(), func(db *store.DB) error {
		return db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE record SET takedown_ref = ? WHERE collection = ? AND rkey = ?`,
				nullable(ref), uri.Collection().String(), uri.RecordKey().String())
			return err
		})
	})
}

// takedownBlob sets or clears a blob's takedown, with takedownRecord's
// rules.
func (s *Server) takedownBlob(ctx context.Context, did, c, ref string) error {
	return s.withExistingActor(ctx, did, func(db *store.DB) error {
		return db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE blob SET takedown_ref = ? WHERE cid = ?`, nullable(ref), c)
			return err
		})
	})
}

// subjectStatusOutput is getSubjectStatus's output.
type subjectStatusOutput struct {
	Subject     map[string]string `json:"subject"`
	Takedown    *statusAttr       `json:"takedown,omitempty"`
	Deactivated *statusAttr       `json:"deactivated,omitempty"`
}

var errSubjectNotFound = xrpc.InvalidRequest("NotFound", "Subject not found")

func (s *Server) adminGetSubjectStatus(w http.ResponseWriter, r *http.Request, _ *caller) error {
	p := lexParams{nsidGetSubjectStatus, r}
	did, err := p.str("did", false, "did")
	if err != nil {
		return err
	}
	uri, err := p.str("uri", false, "at-uri")
	if err != nil {
		return err
	}
	blob, err := p.str("blob", false, "cid")
	if err != nil {
		return err
	}
	ctx := r.Context()
	var out *subjectStatusOutput
	switch {
	case blob != "":
		if did == "" {
			return xrpc.InvalidRequest("", "Must provide a did to request blob state")
		}
		out, err = s.blobStatus(ctx, did, blob)
	case uri != "":
		out, err = s.recordStatus(ctx, syntax.ATURI(uri))
	case did != "":
		out, err = s.repoStatus(ctx, did)
	default:
		return xrpc.InvalidRequest("", "No provided subject")
	}
	if errors.Is(err, errNoRepo) {
		return xrpc.InvalidRequest("NotFound", "Repo not found")
	}
	if err != nil {
		return err
	}
	if out == nil {
		return errSubjectNotFound
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) repoStatus(ctx context.Context, did string) (*subjectStatusOutput, error) {
	acc, err := s.accounts.ByDID(ctx, did)
	if errors.Is(err, account.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &subjectStatusOutput{
		Subject:     map[string]string{"$type": typeRepoRef, "did": did},
		Takedown:    attrOf(acc.TakedownRef),
		Deactivated: &statusAttr{Applied: acc.DeactivatedAt != ""},
	}, nil
}

func (s *Server) recordStatus(ctx context.Context, uri syntax.ATURI) (*subjectStatusOutput, error) {
	var out *subjectStatusOutput
	err := s.withExistingActor(ctx, uri.Authority().String(), func(db *store.DB) error {
		var raw []byte
		var ref sql.NullString
		err := db.Reader().QueryRowContext(ctx, `SELECT cid, takedown_ref FROM record WHERE collection = ? AND rkey = ?`,
			uri.Collection().String(), uri.RecordKey().String()).Scan(&raw, &ref)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		c, err := cid.Cast(raw)
		if err != nil {
			return err
		}
		out = &subjectStatusOutput{
			Subject:  map[string]string{"$type": typeStrongRef, "uri": uri.String(), "cid": c.String()},
			Takedown: attrOf(ref.String),
		}
		return nil
	})
	return out, err
}

func (s *Server) blobStatus(ctx context.Context, did, c string) (*subjectStatusOutput, error) {
	var out *subjectStatusOutput
	err := s.withExistingActor(ctx, did, func(db *store.DB) error {
		var ref sql.NullString
		err := db.Reader().QueryRowContext(ctx, `SELECT takedown_ref FROM blob WHERE cid = ?`, c).Scan(&ref)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		out = &subjectStatusOutput{
			Subject:  map[string]string{"$type": typeRepoBlobRef, "did": did, "cid": c},
			Takedown: attrOf(ref.String),
		}
		return nil
	})
	return out, err
}

// ---------------------------------------------------------------- account overrides

func (s *Server) adminUpdateAccountHandle(w http.ResponseWriter, r *http.Request, _ *caller) error {
	in, err := decodeLexInput(r)
	if err != nil {
		return err
	}
	did, _, err := in.str("did", true, "did")
	if err != nil {
		return err
	}
	handle, _, err := in.str("handle", true, "handle")
	if err != nil {
		return err
	}
	// TODO(admin): the reference skips the slur and reserved-name checks
	// for the admin (allowAnyValid); setHandle makes neither yet.
	if err := s.setHandle(r.Context(), did, handle); err != nil {
		return err
	}
	return ok(w)
}

func (s *Server) adminUpdateAccountEmail(w http.ResponseWriter, r *http.Request, _ *caller) error {
	in, err := decodeLexInput(r)
	if err != nil {
		return err
	}
	ident, _, err := in.str("account", true, "at-identifier")
	if err != nil {
		return err
	}
	email, _, err := in.str("email", true, "")
	if err != nil {
		return err
	}
	ctx := r.Context()
	var acc *account.Account
	switch {
	case strings.HasPrefix(ident, "did:"):
		acc, err = s.accounts.ByDID(ctx, ident)
	case ident == strings.ToLower(ident):
		// The reference compares the handle exactly; stored handles are
		// lower case.
		acc, err = s.accounts.ByHandle(ctx, ident)
	default:
		err = account.ErrNotFound
	}
	if errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("", "Account does not exist: %s", ident)
	}
	if err != nil {
		return err
	}
	// No validation, as in the reference; an address another account
	// holds fails the database's unique index: a 500 there too.
	if err := s.accounts.SetEmailAdmin(ctx, acc.DID, strings.ToLower(email)); err != nil {
		return err
	}
	return ok(w)
}

func (s *Server) adminUpdateAccountPassword(w http.ResponseWriter, r *http.Request, _ *caller) error {
	in, err := decodeLexInput(r)
	if err != nil {
		return err
	}
	did, _, err := in.str("did", true, "did")
	if err != nil {
		return err
	}
	password, _, err := in.str("password", true, "")
	if err != nil {
		return err
	}
	if jsvalue.Length(password) > auth.NewPasswordMaxLength {
		return xrpc.InvalidRequest("", "Invalid password length.")
	}
	hash, err := s.hasher.Hash(password)
	if err != nil {
		return err
	}
	if err := s.accounts.SetPasswordAdmin(r.Context(), did, hash); err != nil {
		return err
	}
	return ok(w)
}

func (s *Server) adminDeleteAccount(w http.ResponseWriter, r *http.Request, _ *caller) error {
	in, err := decodeLexInput(r)
	if err != nil {
		return err
	}
	did, _, err := in.str("did", true, "did")
	if err != nil {
		return err
	}
	// No existence check: an unknown DID still gets its #account deleted.
	if err := s.removeAccount(r.Context(), did); err != nil {
		return err
	}
	return ok(w)
}

// adminEmailSubject is the reference's moderation mailer's default subject.
const adminEmailSubject = "Message via your PDS"

func (s *Server) adminSendEmail(w http.ResponseWriter, r *http.Request, _ *caller) error {
	in, err := decodeLexInput(r)
	if err != nil {
		return err
	}
	recipient, _, err := in.str("recipientDid", true, "did")
	if err != nil {
		return err
	}
	content, _, err := in.str("content", true, "")
	if err != nil {
		return err
	}
	subject, hasSubject, err := in.str("subject", false, "")
	if err != nil {
		return err
	}
	if _, _, err := in.str("senderDid", true, "did"); err != nil {
		return err
	}
	if _, _, err := in.str("comment", false, ""); err != nil {
		return err
	}
	acc, err := s.accounts.ByDID(r.Context(), recipient)
	if errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("", "Recipient not found")
	}
	if err != nil {
		return err
	}
	if acc.Email == "" {
		return xrpc.InvalidRequest("", "account does not have an email address")
	}
	if !hasSubject {
		subject = adminEmailSubject
	}
	s.outbox.Send(mail.Message{
		To: acc.Email, DID: acc.DID, Purpose: "admin", Subject: subject, Body: content, Time: s.clock.Now(),
	})
	xrpc.WriteJSON(w, http.StatusOK, map[string]bool{"sent": true})
	return nil
}

// ---------------------------------------------------------------- invites

func (s *Server) adminSetAccountInvites(disabled bool) xrpc.Handler[*caller] {
	return func(w http.ResponseWriter, r *http.Request, _ *caller) error {
		in, err := decodeLexInput(r)
		if err != nil {
			return err
		}
		did, _, err := in.str("account", true, "did")
		if err != nil {
			return err
		}
		if _, _, err := in.str("note", false, ""); err != nil {
			return err
		}
		if err := s.accounts.SetInvitesDisabled(r.Context(), did, disabled); err != nil {
			return err
		}
		return ok(w)
	}
}

func (s *Server) adminDisableInviteCodes(w http.ResponseWriter, r *http.Request, _ *caller) error {
	in, err := decodeLexInput(r)
	if err != nil {
		return err
	}
	codes, err := in.strs("codes")
	if err != nil {
		return err
	}
	accounts, err := in.strs("accounts")
	if err != nil {
		return err
	}
	if slices.Contains(accounts, "admin") {
		return xrpc.InvalidRequest("", "cannot disable admin invite codes")
	}
	if err := s.accounts.DisableInviteCodes(r.Context(), codes, accounts); err != nil {
		return err
	}
	return ok(w)
}

var errMalformedCursor = xrpc.InvalidRequest("", "Malformed cursor")

// maxJSDate is the largest time, in ms from the epoch, a JavaScript Date
// holds.
const maxJSDate = 8.64e15

func (s *Server) adminGetInviteCodes(w http.ResponseWriter, r *http.Request, _ *caller) error {
	p := lexParams{nsidGetInviteCodes, r}
	sortName, err := p.str("sort", false, "")
	if err != nil {
		return err
	}
	limit, err := p.integer("limit", 1, 500, 100)
	if err != nil {
		return err
	}
	rawCursor, err := p.str("cursor", false, "")
	if err != nil {
		return err
	}
	var sort account.InviteSort
	switch sortName {
	case "", "recent":
		sort = account.SortRecent
	case "usage":
		sort = account.SortUsage
	default:
		return xrpc.InvalidRequest("", "unknown sort method: %s", sortName)
	}
	var cursor *account.InviteCursor
	if rawCursor != "" {
		parts := strings.Split(rawCursor, "::")
		if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
			return errMalformedCursor
		}
		n, ok := jsvalue.ParseInt(parts[0])
		if !ok {
			return errMalformedCursor
		}
		cursor = &account.InviteCursor{Code: parts[1]}
		if sort == account.SortUsage {
			cursor.Uses = int64(max(min(n, math.MaxInt64), math.MinInt64))
		} else {
			if math.Abs(n) > maxJSDate {
				return errMalformedCursor
			}
			cursor.CreatedAt = time.UnixMilli(int64(n))
		}
	}
	codes, err := s.accounts.ListInviteCodes(r.Context(), sort, int(limit), cursor)
	if err != nil {
		return err
	}
	out := comatproto.AdminGetInviteCodes_Output{Codes: []*comatproto.ServerDefs_InviteCode{}}
	for _, c := range codes {
		out.Codes = append(out.Codes, inviteView(c))
	}
	if n := len(codes); n > 0 {
		last := codes[n-1]
		primary := strconv.Itoa(len(last.Uses))
		if sort == account.SortRecent {
			t, _ := time.Parse(account.TimeFormat, last.CreatedAt)
			primary = strconv.FormatInt(t.UnixMilli(), 10)
		}
		c := primary + "::" + last.Code
		out.Cursor = &c
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

// ---------------------------------------------------------------- lexicon checks

// The reference validates every input and query against its lexicon
// before (queries) or after (procedures) auth, and reports the first issue
// in its own words. These helpers check the admin methods' inputs the same
// way, properties in schema order.

// lexIssue is an input issue at path: "<msg> at <path>".
func lexIssue(path, format string, args ...any) error {
	return xrpc.InvalidRequest("", "%s at %s", fmt.Sprintf(format, args...), path)
}

var plainKey = regexp.MustCompile(`^[a-zA-Z_$][a-zA-Z0-9_]*$`)

// pathKey is the JSON path segment of an object key.
func pathKey(key string) string {
	if plainKey.MatchString(key) {
		return "." + key
	}
	return "[" + jsvalue.Quote(key) + "]"
}

// lexObject is a JSON object of a procedure's input.
type lexObject struct {
	path string
	m    map[string]json.RawMessage
}

// decodeLexInput reads a procedure's JSON input, which must be an object.
func decodeLexInput(r *http.Request) (*lexObject, error) {
	var raw json.RawMessage
	if err := xrpc.DecodeJSON(r, xrpc.JSONLimit, &raw); err != nil {
		return nil, err
	}
	return lexObjectAt(raw, "$")
}

func lexObjectAt(raw json.RawMessage, path string) (*lexObject, error) {
	var m map[string]json.RawMessage
	if jsonKind(raw) != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, lexIssue(path, "Expected object value type (got %s)", jsvalue.PreviewJSON(raw))
	}
	return &lexObject{path: path, m: m}, nil
}

// jsonKind is the first byte of a JSON value: '{', '[', '"', 't', 'f', 'n'
// or a number's first character.
func jsonKind(raw json.RawMessage) byte {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b
	}
	return 0
}

// str reads a string property, checking its format ("" for none).
func (o *lexObject) str(key string, required bool, format string) (string, bool, error) {
	raw, ok := o.m[key]
	if !ok {
		if required {
			return "", false, lexIssue(o.path, "Missing required key %q", key)
		}
		return "", false, nil
	}
	path := o.path + pathKey(key)
	var v string
	if jsonKind(raw) != '"' || json.Unmarshal(raw, &v) != nil {
		return "", false, lexIssue(path, "Expected string value type (got %s)", jsvalue.PreviewJSON(raw))
	}
	if err := checkFormat(format, v); err != "" {
		return "", false, lexIssue(path, "%s", err)
	}
	return v, true, nil
}

func (o *lexObject) boolean(key string, required bool) (bool, bool, error) {
	raw, ok := o.m[key]
	if !ok {
		if required {
			return false, false, lexIssue(o.path, "Missing required key %q", key)
		}
		return false, false, nil
	}
	var v bool
	if k := jsonKind(raw); k != 't' && k != 'f' || json.Unmarshal(raw, &v) != nil {
		return false, false, lexIssue(o.path+pathKey(key), "Expected boolean value type (got %s)", jsvalue.PreviewJSON(raw))
	}
	return v, true, nil
}

func (o *lexObject) object(key string, required bool) (*lexObject, bool, error) {
	raw, ok := o.m[key]
	if !ok {
		if required {
			return nil, false, lexIssue(o.path, "Missing required key %q", key)
		}
		return nil, false, nil
	}
	obj, err := lexObjectAt(raw, o.path+pathKey(key))
	return obj, err == nil, err
}

// strs reads an optional array of strings.
func (o *lexObject) strs(key string) ([]string, error) {
	raw, ok := o.m[key]
	if !ok {
		return nil, nil
	}
	path := o.path + pathKey(key)
	var items []json.RawMessage
	if jsonKind(raw) != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, lexIssue(path, "Expected array value type (got %s)", jsvalue.PreviewJSON(raw))
	}
	out := make([]string, len(items))
	for i, item := range items {
		if jsonKind(item) != '"' || json.Unmarshal(item, &out[i]) != nil {
			return nil, lexIssue(fmt.Sprintf("%s[%d]", path, i), "Expected string value type (got %s)", jsvalue.PreviewJSON(item))
		}
	}
	return out, nil
}

// checkFormat checks v against a lexicon string format; it returns the
// reference's issue ("" when v is fine).
func checkFormat(format, v string) string {
	var err error
	var name string
	switch format {
	case "":
		return ""
	case "did":
		name = "DID"
		_, err = syntax.ParseDID(v)
	case "handle":
		name = "handle"
		_, err = syntax.ParseHandle(v)
	case "at-identifier":
		name = "AT identifier"
		_, err = syntax.ParseAtIdentifier(v)
	case "at-uri":
		name = "at-uri"
		_, err = syntax.ParseATURI(v)
	case "cid":
		name = "CID string"
		// Only a CID's canonical string passes, as the reference checks.
		var c cid.Cid
		if len(v) > 128 {
			err = errors.New("too long")
		} else if c, err = cid.Decode(v); err == nil && c.String() != v {
			err = errors.New("not canonical")
		}
	default:
		panic("pds: unknown lexicon format " + format)
	}
	if err != nil {
		return fmt.Sprintf("Invalid %s (got %s)", name, jsvalue.Preview(v))
	}
	return ""
}

// lexParams checks a query's parameters; issues read "Invalid <nsid>
// params: <issue>" with no path. An empty value counts as absent, as the
// reference's query parser has it.
type lexParams struct {
	nsid string
	r    *http.Request
}

func (p lexParams) issue(format string, args ...any) error {
	return xrpc.InvalidRequest("", "Invalid %s params: %s", p.nsid, fmt.Sprintf(format, args...))
}

func (p lexParams) values(name string) []string {
	var out []string
	for _, v := range p.r.URL.Query()[name] {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (p lexParams) str(name string, required bool, format string) (string, error) {
	vals := p.values(name)
	switch len(vals) {
	case 0:
		if required {
			return "", p.issue("Missing required key %q", name)
		}
		return "", nil
	case 1:
		if err := checkFormat(format, vals[0]); err != "" {
			return "", p.issue("%s", err)
		}
		return vals[0], nil
	}
	items := make([]any, len(vals))
	for i, v := range vals {
		items[i] = v
	}
	return "", p.issue("Expected string value type (got %s)", jsvalue.Preview(items))
}

// strs reads an array parameter (name=a&name=b) of strings in format.
func (p lexParams) strs(name string, required bool, format string) ([]string, error) {
	vals := p.values(name)
	if len(vals) == 0 && required {
		return nil, p.issue("Missing required key %q", name)
	}
	for _, v := range vals {
		if err := checkFormat(format, v); err != "" {
			return nil, p.issue("%s", err)
		}
	}
	return vals, nil
}

var intParam = regexp.MustCompile(`^-?[0-9]+$`)

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER.
const maxSafeInteger = 1<<53 - 1

// integer reads an integer parameter within [minimum, maximum], def when
// absent. The reference parses decimal digits as a number and keeps
// anything else as the string it was.
func (p lexParams) integer(name string, minimum, maximum, def int64) (int64, error) {
	vals := p.values(name)
	values := make([]any, len(vals))
	var n float64
	isNum := false
	for i, v := range vals {
		values[i] = v
		if intParam.MatchString(v) {
			n, _ = strconv.ParseFloat(v, 64)
			values[i], isNum = n, true
		}
	}
	switch {
	case len(vals) == 0:
		return def, nil
	case len(vals) > 1:
		return 0, p.issue("Expected integer value type (got %s)", jsvalue.Preview(values))
	case !isNum || math.Abs(n) > maxSafeInteger:
		return 0, p.issue("Expected integer value type (got %s)", jsvalue.Preview(values[0]))
	case n < float64(minimum):
		return 0, p.issue("integer too small (minimum %d, got %s)", minimum, jsvalue.Preview(n))
	case n > float64(maximum):
		return 0, p.issue("integer too big (maximum %d, got %s)", maximum, jsvalue.Preview(n))
	}
	return int64(n), nil
}
