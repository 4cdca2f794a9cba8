package pds

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/blob"
	"github.com/fakepds/fakepds/pds/jsvalue"
	"github.com/fakepds/fakepds/pds/mail"
	"github.com/fakepds/fakepds/pds/plc"
	"github.com/fakepds/fakepds/pds/repo"
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
	handleInput(s, x, nsidUpdateSubjectStatus, xrpc.JSONLimit, moderator, s.adminUpdateSubjectStatus)
	s.handle(x, xrpc.Query, nsidGetSubjectStatus, moderator, s.adminGetSubjectStatus)
	handleInput(s, x, "com.atproto.admin.updateAccountHandle", xrpc.JSONLimit, adminAuth, s.adminUpdateAccountHandle)
	handleInput(s, x, "com.atproto.admin.updateAccountEmail", xrpc.JSONLimit, adminAuth, s.adminUpdateAccountEmail)
	handleInput(s, x, "com.atproto.admin.updateAccountPassword", xrpc.JSONLimit, adminAuth, s.adminUpdateAccountPassword)
	handleInput(s, x, "com.atproto.admin.deleteAccount", xrpc.JSONLimit, adminAuth, s.adminDeleteAccount)
	handleInput(s, x, nsidSendEmail, xrpc.JSONLimit, moderator, s.adminSendEmail)
	handleInput(s, x, nsidDisableAccountInvites, xrpc.JSONLimit, moderator, s.adminSetAccountInvites(true))
	handleInput(s, x, nsidEnableAccountInvites, xrpc.JSONLimit, moderator, s.adminSetAccountInvites(false))
	handleInput(s, x, nsidDisableInviteCodes, xrpc.JSONLimit, moderator, s.adminDisableInviteCodes)
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

// modServiceAuth checks a service JWT as the reference's xrpc-server does
// before it looks up the issuer's key: a well-formed one is from no
// moderation service fakepds trusts.
func (s *Server) modServiceAuth(token, nsid string) error {
	if _, err := s.checkServiceJWT(token, nsid); err != nil {
		return err
	}
	return xrpc.AuthRequired("UntrustedIss", "Untrusted issuer")
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
	views, err := s.accountViews(r.Context(), []string{param(r, "did")})
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
	views, err := s.accountViews(r.Context(), paramList(r, "dids"))
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

// updateSubjectStatusInput keeps subject and takedown as sent: the output
// echoes them.
type updateSubjectStatusInput struct {
	Subject     json.RawMessage `json:"subject"`
	Takedown    json.RawMessage `json:"takedown"`
	Deactivated *statusAttr     `json:"deactivated"`
}

// subjectRef is the fields of the subject union's members (the lexicon
// checked the known ones; an unknown $type passes, as in the reference).
type subjectRef struct {
	Type string       `json:"$type"`
	DID  string       `json:"did"` // repoRef, repoBlobRef
	URI  syntax.ATURI `json:"uri"` // strongRef
	CID  string       `json:"cid"` // strongRef, repoBlobRef
}

func (s *Server) adminUpdateSubjectStatus(w http.ResponseWriter, r *http.Request, _ *caller, in *updateSubjectStatusInput) error {
	var sub subjectRef
	if err := json.Unmarshal(in.Subject, &sub); err != nil {
		return err
	}
	var takedown *statusAttr
	if len(in.Takedown) > 0 {
		if err := json.Unmarshal(in.Takedown, &takedown); err != nil {
			return err
		}
	}
	deactivated := in.Deactivated
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
		var err error
		switch sub.Type {
		case typeRepoRef:
			err = s.takedownAccount(ctx, sub.DID, ref)
		case typeStrongRef:
			err = s.takedownRecord(ctx, sub.URI, ref)
		case typeRepoBlobRef:
			err = s.takedownBlob(ctx, sub.DID, sub.CID, ref)
		default:
			err = xrpc.InvalidRequest("", "Invalid subject (%s)", sub.Type)
		}
		if err != nil {
			return err
		}
	}
	if deactivated != nil && sub.Type == typeRepoRef {
		var err error
		if deactivated.Applied {
			err = s.adminDeactivate(ctx, sub.DID)
		} else {
			err = s.adminActivate(ctx, sub.DID)
		}
		if err != nil {
			return err
		}
	}
	if takedown == nil && deactivated == nil && sub.Type == typeRepoRef {
		// Historically this method always sequences the account's status.
		if err := s.sequenceAccountStatus(ctx, sub.DID); err != nil {
			return err
		}
	}
	xrpc.WriteJSON(w, http.StatusOK, struct {
		Subject  json.RawMessage `json:"subject"`
		Takedown json.RawMessage `json:"takedown,omitempty"`
	}{in.Subject, in.Takedown})
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

// takedownRecord sets or clears a record's takedown; a record that does not
// exist is not an error, a repo that does not exist is a 500, as in the
// reference.
func (s *Server) takedownRecord(ctx context.Context, uri syntax.ATURI, ref string) error {
	return s.withExistingActor(ctx, uri.Authority().String(), func(db *store.DB) error {
		return db.Write(ctx, func(tx *sql.Tx) error {
			return repo.SetRecordTakedown(ctx, tx, uri.Collection(), uri.RecordKey(), ref)
		})
	})
}

// takedownBlob sets or clears a blob's takedown, with takedownRecord's
// rules.
func (s *Server) takedownBlob(ctx context.Context, did, c, ref string) error {
	return s.withExistingActor(ctx, did, func(db *store.DB) error {
		return db.Write(ctx, func(tx *sql.Tx) error { return blob.SetTakedown(ctx, tx, c, ref) })
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
	did, uri, blob := param(r, "did"), param(r, "uri"), param(r, "blob")
	ctx := r.Context()
	var out *subjectStatusOutput
	var err error
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
		c, ref, err := repo.RecordTakedown(ctx, db.Reader(), uri.Collection(), uri.RecordKey())
		if errors.Is(err, repo.ErrRecordNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		out = &subjectStatusOutput{
			Subject:  map[string]string{"$type": typeStrongRef, "uri": uri.String(), "cid": c.String()},
			Takedown: attrOf(ref),
		}
		return nil
	})
	return out, err
}

func (s *Server) blobStatus(ctx context.Context, did, c string) (*subjectStatusOutput, error) {
	var out *subjectStatusOutput
	err := s.withExistingActor(ctx, did, func(db *store.DB) error {
		ref, err := blob.Takedown(ctx, db.Reader(), c)
		if errors.Is(err, blob.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		out = &subjectStatusOutput{
			Subject:  map[string]string{"$type": typeRepoBlobRef, "did": did, "cid": c},
			Takedown: attrOf(ref),
		}
		return nil
	})
	return out, err
}

// ---------------------------------------------------------------- account overrides

func (s *Server) adminUpdateAccountHandle(w http.ResponseWriter, r *http.Request, _ *caller, in *comatproto.AdminUpdateAccountHandle_Input) error {
	// TODO(admin): the reference skips the slur and reserved-name checks
	// for the admin (allowAnyValid); setHandle makes neither yet.
	if err := s.setHandle(r.Context(), in.Did, in.Handle); err != nil {
		return err
	}
	return noOutput(w)
}

func (s *Server) adminUpdateAccountEmail(w http.ResponseWriter, r *http.Request, _ *caller, in *comatproto.AdminUpdateAccountEmail_Input) error {
	ident, email := in.Account, in.Email
	ctx := r.Context()
	var acc *account.Account
	var err error
	if strings.HasPrefix(ident, "did:") {
		acc, err = s.accounts.ByDID(ctx, ident)
	} else {
		acc, err = s.accounts.ByHandle(ctx, ident)
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
	return noOutput(w)
}

func (s *Server) adminUpdateAccountPassword(w http.ResponseWriter, r *http.Request, _ *caller, in *comatproto.AdminUpdateAccountPassword_Input) error {
	did, password := in.Did, in.Password
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
	return noOutput(w)
}

func (s *Server) adminDeleteAccount(w http.ResponseWriter, r *http.Request, _ *caller, in *comatproto.AdminDeleteAccount_Input) error {
	// No existence check: an unknown DID still gets its #account deleted.
	if err := s.removeAccount(r.Context(), in.Did); err != nil {
		return err
	}
	return noOutput(w)
}

// adminEmailSubject is the reference's moderation mailer's default subject.
const adminEmailSubject = "Message via your PDS"

func (s *Server) adminSendEmail(w http.ResponseWriter, r *http.Request, _ *caller, in *comatproto.AdminSendEmail_Input) error {
	acc, err := s.accounts.ByDID(r.Context(), in.RecipientDid)
	if errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("", "Recipient not found")
	}
	if err != nil {
		return err
	}
	if acc.Email == "" {
		return xrpc.InvalidRequest("", "account does not have an email address")
	}
	subject := adminEmailSubject
	if in.Subject != nil {
		subject = *in.Subject
	}
	s.outbox.Send(mail.Message{
		To: acc.Email, DID: acc.DID, Purpose: "admin", Subject: subject, Body: in.Content, Time: s.clock.Now(),
	})
	xrpc.WriteJSON(w, http.StatusOK, map[string]bool{"sent": true})
	return nil
}

// ---------------------------------------------------------------- invites

// accountInvitesInput is disableAccountInvites' and enableAccountInvites'
// input.
type accountInvitesInput struct {
	Account string `json:"account"`
}

func (s *Server) adminSetAccountInvites(disabled bool) xrpc.InputHandler[*caller, accountInvitesInput] {
	return func(w http.ResponseWriter, r *http.Request, _ *caller, in *accountInvitesInput) error {
		if err := s.accounts.SetInvitesDisabled(r.Context(), in.Account, disabled); err != nil {
			return err
		}
		return noOutput(w)
	}
}

func (s *Server) adminDisableInviteCodes(w http.ResponseWriter, r *http.Request, _ *caller, in *comatproto.AdminDisableInviteCodes_Input) error {
	if slices.Contains(in.Accounts, "admin") {
		return xrpc.InvalidRequest("", "cannot disable admin invite codes")
	}
	if err := s.accounts.DisableInviteCodes(r.Context(), in.Codes, in.Accounts); err != nil {
		return err
	}
	return noOutput(w)
}

var errMalformedCursor = xrpc.InvalidRequest("", "Malformed cursor")

// maxJSDate is the largest time, in ms from the epoch, a JavaScript Date
// holds.
const maxJSDate = 8.64e15

func (s *Server) adminGetInviteCodes(w http.ResponseWriter, r *http.Request, _ *caller) error {
	sortName, limit, rawCursor := param(r, "sort"), paramInt(r, "limit", 100), param(r, "cursor")
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
	codes, err := s.accounts.ListInviteCodes(r.Context(), sort, limit, cursor)
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
