package pds

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/blob"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

func (s *Server) registerLifecycle(x *xrpc.Mux) {
	s.handle(x, xrpc.Query, "com.atproto.server.checkAccountStatus", access(scopesStandard, check{}), s.checkAccountStatus)
	s.handle(x, xrpc.Procedure, "com.atproto.server.activateAccount", access(scopesFull, check{}), s.activateAccount)
	handleInput(s, x, "com.atproto.server.deactivateAccount", xrpc.JSONLimit, access(append(scopesFull, auth.ScopeTakendown), check{}), s.deactivateAccount)
	s.handle(x, xrpc.Procedure, "com.atproto.server.requestAccountDelete", accessFull,
		s.emailTokenRequest(account.PurposeDeleteAccount, "Account Deletion Requested"))
	handleInput(s, x, "com.atproto.server.deleteAccount", xrpc.JSONLimit, noAuth, s.deleteAccount)
	s.handle(x, xrpc.Procedure, "com.atproto.server.requestEmailConfirmation", accessStandard,
		s.emailTokenRequest(account.PurposeConfirmEmail, "Email Confirmation"))
	handleInput(s, x, "com.atproto.server.confirmEmail", xrpc.JSONLimit, accessStandard, s.confirmEmail)
	handleInput(s, x, "com.atproto.server.requestPasswordReset", xrpc.JSONLimit, noAuth, s.requestPasswordReset)
	handleInput(s, x, "com.atproto.server.resetPassword", xrpc.JSONLimit, noAuth, s.resetPassword)
	s.handle(x, xrpc.Procedure, "com.atproto.server.requestEmailUpdate", accessFull, s.requestEmailUpdate)
	handleInput(s, x, "com.atproto.server.updateEmail", xrpc.JSONLimit, accessFull, s.updateEmail)
	handleInput(s, x, "com.atproto.server.createInviteCode", xrpc.JSONLimit, adminAuth, s.createInviteCode)
	handleInput(s, x, "com.atproto.server.createInviteCodes", xrpc.JSONLimit, adminAuth, s.createInviteCodes)
	s.handle(x, xrpc.Query, "com.atproto.server.getAccountInviteCodes", accessFull, s.getAccountInviteCodes)
}

func (s *Server) checkAccountStatus(w http.ResponseWriter, r *http.Request, c *caller) error {
	ctx := r.Context()
	acc, err := s.accounts.ByDID(ctx, c.DID)
	activated := err == nil && acc.TakedownRef == "" && acc.DeactivatedAt == ""
	var out comatproto.ServerCheckAccountStatus_Output
	out.Activated = activated
	err = s.withActor(ctx, c.DID, func(db *store.DB) error {
		head, rev, err := repo.Head(ctx, db.Reader())
		if err != nil {
			return err
		}
		out.RepoCommit, out.RepoRev = head.String(), rev
		if out.RepoBlocks, out.IndexedRecords, err = repo.Counts(ctx, db.Reader()); err != nil {
			return err
		}
		out.ExpectedBlobs, out.ImportedBlobs, err = blob.Counts(ctx, db.Reader())
		return err
	})
	if err != nil {
		return err
	}
	out.ValidDid = s.didDocProblem(ctx, c.DID) == ""
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

// didDocProblem says why did's document does not point at this PDS with
// its keys ("" when it does), in the reference's words.
func (s *Server) didDocProblem(ctx context.Context, did string) string {
	d, err := syntax.ParseDID(did)
	if err != nil || d.Method() != "plc" {
		return "Could not resolve DID"
	}
	data, err := s.plc.Data(ctx, d)
	if err != nil {
		return "Could not resolve DID"
	}
	srvPub, _ := s.plcKey.PublicKey()
	hasKey := false
	for _, k := range data.RotationKeys {
		hasKey = hasKey || k == srvPub.DIDKey()
	}
	if !hasKey {
		return "Server rotation key not included in PLC DID data"
	}
	if svc, ok := data.Services["atproto_pds"]; !ok || svc.Endpoint != s.publicURL() {
		return "DID document atproto_pds service endpoint does not match PDS public url"
	}
	key, err := s.signingKey(ctx, did)
	if err != nil {
		return "DID document verification method does not match expected signing key"
	}
	pub, _ := key.PublicKey()
	if data.VerificationMethods["atproto"] != pub.DIDKey() {
		return "DID document verification method does not match expected signing key"
	}
	return ""
}

func (s *Server) activateAccount(w http.ResponseWriter, r *http.Request, c *caller) error {
	ctx := r.Context()
	if p := s.didDocProblem(ctx, c.DID); p != "" {
		return xrpc.InvalidRequest("", "%s", p)
	}
	acc, err := s.accounts.ByDID(ctx, c.DID)
	if errors.Is(err, account.ErrNotFound) || err == nil && acc.TakedownRef != "" {
		return xrpc.InvalidRequest("AccountNotFound", "user not found")
	}
	if err != nil {
		return err
	}
	if err := s.accounts.Activate(ctx, c.DID); err != nil {
		return err
	}
	acc.DeactivatedAt, acc.DeleteAfter = "", ""
	if err := s.sequenceActivation(ctx, acc); err != nil {
		return err
	}
	return noOutput(w)
}

// sequenceActivation emits what the reference emits when an account is
// (re)activated, even one already active: #account, #identity, #sync.
func (s *Server) sequenceActivation(ctx context.Context, acc *account.Account) error {
	var syncEvt *comatproto.SyncSubscribeRepos_Sync
	err := s.withActor(ctx, acc.DID, func(db *store.DB) error {
		var err error
		syncEvt, err = repo.SyncEvent(ctx, db.Reader(), syntax.DID(acc.DID))
		return err
	})
	if err != nil {
		return err
	}
	_, err = s.seq.Append(ctx, s.clock.Now(),
		sequencer.Account(acc.DID, statusOf(acc)),
		sequencer.Identity(acc.DID, handleOrInvalid(acc)),
		sequencer.Sync(syncEvt),
	)
	return err
}

// statusOf is the #account status of acc: "" when active.
func statusOf(acc *account.Account) string {
	if acc.Active() {
		return ""
	}
	return string(acc.Status())
}

func (s *Server) deactivateAccount(w http.ResponseWriter, r *http.Request, c *caller, in *comatproto.ServerDeactivateAccount_Input) error {
	var deleteAfter time.Time
	if in.DeleteAfter != nil {
		// The lexicon checked the format; this reads it.
		if dt, err := syntax.ParseDatetimeLenient(*in.DeleteAfter); err == nil {
			deleteAfter = dt.Time()
		}
	}
	ctx := r.Context()
	if err := s.accounts.Deactivate(ctx, c.DID, s.clock.Now(), deleteAfter); errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("", "Account not found")
	} else if err != nil {
		return err
	}
	acc, err := s.accounts.ByDID(ctx, c.DID)
	if err != nil {
		return err
	}
	if _, err := s.seq.Append(ctx, s.clock.Now(), sequencer.Account(c.DID, statusOf(acc))); err != nil {
		return err
	}
	return noOutput(w)
}

// accountWithEmail finds the caller's account and insists it has an email,
// as the email flows do.
func (s *Server) accountWithEmail(ctx context.Context, did string) (*account.Account, error) {
	acc, err := s.accounts.ByDID(ctx, did)
	if errors.Is(err, account.ErrNotFound) {
		return nil, xrpc.InvalidRequest("", "account not found")
	}
	if err != nil {
		return nil, err
	}
	if acc.Email == "" {
		return nil, xrpc.InvalidRequest("", "account does not have an email address")
	}
	return acc, nil
}

// emailTokenRequest is the handler of the methods that mail the caller a
// token for purpose (requestAccountDelete, requestEmailConfirmation,
// requestPlcOperationSignature): they differ only in who may call them.
func (s *Server) emailTokenRequest(purpose account.Purpose, subject string) xrpc.Handler[*caller] {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		acc, err := s.accountWithEmail(r.Context(), c.DID)
		if err != nil {
			return err
		}
		tok, err := s.accounts.CreateEmailToken(r.Context(), c.DID, purpose, s.clock.Now())
		if err != nil {
			return err
		}
		s.sendMail(acc, purpose, tok, subject)
		return noOutput(w)
	}
}

// emailTokenError maps the account manager's token errors.
func emailTokenError(err error) error {
	switch {
	case errors.Is(err, account.ErrTokenInvalid):
		return xrpc.InvalidRequest("InvalidToken", "Token is invalid")
	case errors.Is(err, account.ErrTokenExpired):
		return xrpc.InvalidRequest("ExpiredToken", "Token is expired")
	}
	return err
}

func (s *Server) deleteAccount(w http.ResponseWriter, r *http.Request, _ *caller, in *comatproto.ServerDeleteAccount_Input) error {
	ctx := r.Context()
	if len(in.Password) > auth.OldPasswordMaxLength {
		return xrpc.AuthRequired("", "Password too long. Consider resetting your password.")
	}
	acc, err := s.accounts.ByDID(ctx, in.Did)
	if errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("", "account not found")
	}
	if err != nil {
		return err
	}
	if okPw, err := auth.Verify(in.Password, acc.PasswordScrypt); err != nil || !okPw {
		return xrpc.AuthRequired("", "Invalid did or password")
	}
	if _, err := s.accounts.CheckEmailToken(ctx, acc.DID, account.PurposeDeleteAccount, in.Token, s.clock.Now()); err != nil {
		return emailTokenError(err)
	}
	if err := s.removeAccount(ctx, acc.DID); err != nil {
		return err
	}
	return noOutput(w)
}

// removeAccount deletes an account as the reference does: its rows, its
// actor store, an #account deleted event, and every earlier event of the
// account. The PLC directory is left alone.
func (s *Server) removeAccount(ctx context.Context, did string) error {
	if err := s.accounts.Delete(ctx, did); err != nil && !errors.Is(err, account.ErrNotFound) {
		return err
	}
	s.forgetKey(did)
	s.destroyActorStore(did)
	evs, err := s.seq.Append(ctx, s.clock.Now(), sequencer.Account(did, string(account.StatusDeleted)))
	if err != nil {
		return err
	}
	return s.seq.DeleteAccountEventsBefore(ctx, did, evs[0].Seq)
}

func (s *Server) confirmEmail(w http.ResponseWriter, r *http.Request, c *caller, in *comatproto.ServerConfirmEmail_Input) error {
	ctx := r.Context()
	acc, err := s.accounts.ByDID(ctx, c.DID)
	if errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("AccountNotFound", "user not found")
	}
	if err != nil {
		return err
	}
	if acc.Email != strings.ToLower(in.Email) {
		return xrpc.InvalidRequest("InvalidEmail", "invalid email")
	}
	if _, err := s.accounts.CheckEmailToken(ctx, c.DID, account.PurposeConfirmEmail, in.Token, s.clock.Now()); err != nil {
		return emailTokenError(err)
	}
	if err := s.accounts.DeleteEmailToken(ctx, c.DID, account.PurposeConfirmEmail); err != nil {
		return err
	}
	if err := s.accounts.ConfirmEmail(ctx, c.DID, s.clock.Now()); err != nil {
		return err
	}
	return noOutput(w)
}

func (s *Server) requestPasswordReset(w http.ResponseWriter, r *http.Request, _ *caller, in *comatproto.ServerRequestPasswordReset_Input) error {
	ctx := r.Context()
	acc, err := s.accounts.ByEmail(ctx, strings.ToLower(in.Email))
	if errors.Is(err, account.ErrNotFound) {
		// The reference says so, revealing that the address is unknown.
		return xrpc.InvalidRequest("", "account does not have an email address")
	}
	if err != nil {
		return err
	}
	tok, err := s.accounts.CreateEmailToken(ctx, acc.DID, account.PurposeResetPassword, s.clock.Now())
	if err != nil {
		return err
	}
	s.sendMail(acc, account.PurposeResetPassword, tok, "Password Reset Requested")
	return noOutput(w)
}

func (s *Server) resetPassword(w http.ResponseWriter, r *http.Request, _ *caller, in *comatproto.ServerResetPassword_Input) error {
	if len(in.Password) > auth.NewPasswordMaxLength {
		return xrpc.InvalidRequest("", "Invalid password length.")
	}
	ctx := r.Context()
	did, err := s.accounts.CheckEmailToken(ctx, "", account.PurposeResetPassword, in.Token, s.clock.Now())
	if err != nil {
		return emailTokenError(err)
	}
	hash, err := s.hasher.Hash(in.Password)
	if err != nil {
		return err
	}
	// UpdatePassword also revokes every refresh token, as the reference.
	if err := s.accounts.UpdatePassword(ctx, did, hash); err != nil {
		return err
	}
	if err := s.accounts.DeleteEmailToken(ctx, did, account.PurposeResetPassword); err != nil {
		return err
	}
	return noOutput(w)
}

func (s *Server) requestEmailUpdate(w http.ResponseWriter, r *http.Request, c *caller) error {
	acc, err := s.accountWithEmail(r.Context(), c.DID)
	if err != nil {
		return err
	}
	required := acc.EmailConfirmedAt != ""
	if required {
		tok, err := s.accounts.CreateEmailToken(r.Context(), c.DID, account.PurposeUpdateEmail, s.clock.Now())
		if err != nil {
			return err
		}
		s.sendMail(acc, account.PurposeUpdateEmail, tok, "Email Update Requested")
	}
	xrpc.WriteJSON(w, http.StatusOK, comatproto.ServerRequestEmailUpdate_Output{TokenRequired: required})
	return nil
}

func (s *Server) updateEmail(w http.ResponseWriter, r *http.Request, c *caller, in *comatproto.ServerUpdateEmail_Input) error {
	if !validEmail(in.Email) {
		return xrpc.InvalidRequest("", "This email address is not supported, please use a different email.")
	}
	ctx := r.Context()
	acc, err := s.accounts.ByDID(ctx, c.DID)
	if errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("", "account not found")
	}
	if err != nil {
		return err
	}
	if acc.EmailConfirmedAt != "" && in.Token == nil {
		return xrpc.InvalidRequest("TokenRequired", "confirmation token required")
	}
	if in.Token != nil {
		if _, err := s.accounts.CheckEmailToken(ctx, c.DID, account.PurposeUpdateEmail, *in.Token, s.clock.Now()); err != nil {
			return emailTokenError(err)
		}
	}
	err = s.accounts.UpdateEmail(ctx, c.DID, strings.ToLower(in.Email))
	if errors.Is(err, account.ErrEmailTaken) {
		return xrpc.InvalidRequest("", "This email address is already in use, please use a different email.")
	}
	if err != nil {
		return err
	}
	return noOutput(w)
}

// createInviteCodeInput: integers as float64, since the lexicon (as
// JavaScript) takes 1.0 for 1 and Go's int64 would not.
type createInviteCodeInput struct {
	UseCount   float64 `json:"useCount"`
	ForAccount *string `json:"forAccount"`
}

func (s *Server) createInviteCode(w http.ResponseWriter, r *http.Request, _ *caller, in *createInviteCodeInput) error {
	forAccount := "admin" // the default; sent explicitly, it must be a DID
	if in.ForAccount != nil {
		forAccount = *in.ForAccount
	}
	code := account.NewInviteCode(s.rand("invite-codes"), s.cfg.Hostname)
	if err := s.accounts.CreateInviteCodes(r.Context(), []string{code}, int(in.UseCount), forAccount, "admin", s.clock.Now()); err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, comatproto.ServerCreateInviteCode_Output{Code: code})
	return nil
}

// createInviteCodesInput: integers as float64, as createInviteCodeInput.
type createInviteCodesInput struct {
	CodeCount   *float64 `json:"codeCount"`
	UseCount    float64  `json:"useCount"`
	ForAccounts []string `json:"forAccounts"`
}

func (s *Server) createInviteCodes(w http.ResponseWriter, r *http.Request, _ *caller, in *createInviteCodesInput) error {
	count := int64(1)
	if in.CodeCount != nil {
		count = int64(*in.CodeCount)
	}
	if len(in.ForAccounts) == 0 {
		in.ForAccounts = []string{"admin"}
	}
	out := comatproto.ServerCreateInviteCodes_Output{Codes: []*comatproto.ServerCreateInviteCodes_AccountCodes{}}
	for _, acct := range in.ForAccounts {
		codes := make([]string, count)
		for i := range codes {
			codes[i] = account.NewInviteCode(s.rand("invite-codes"), s.cfg.Hostname)
		}
		if err := s.accounts.CreateInviteCodes(r.Context(), codes, int(in.UseCount), acct, "admin", s.clock.Now()); err != nil {
			return err
		}
		out.Codes = append(out.Codes, &comatproto.ServerCreateInviteCodes_AccountCodes{Account: acct, Codes: codes})
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getAccountInviteCodes(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := r.URL.Query()
	includeUsed := q.Get("includeUsed") != "false"
	ctx := r.Context()
	if acc, err := s.accounts.ByDID(ctx, c.DID); errors.Is(err, account.ErrNotFound) || err == nil && !acc.Active() {
		return xrpc.InvalidRequest("NotFound", "Account not found")
	} else if err != nil {
		return err
	}
	codes, err := s.accounts.InviteCodes(ctx, c.DID)
	if err != nil {
		return err
	}
	out := comatproto.ServerGetAccountInviteCodes_Output{Codes: []*comatproto.ServerDefs_InviteCode{}}
	for _, ic := range codes {
		if ic.Disabled || !includeUsed && len(ic.Uses) >= ic.Available {
			continue
		}
		out.Codes = append(out.Codes, inviteView(ic))
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

// inviteView is an invite code as the lexicon's inviteCode, uses newest
// first.
func inviteView(ic account.InviteCode) *comatproto.ServerDefs_InviteCode {
	v := &comatproto.ServerDefs_InviteCode{
		Code: ic.Code, Available: int64(ic.Available), Disabled: ic.Disabled,
		ForAccount: ic.ForAccount, CreatedBy: ic.CreatedBy, CreatedAt: ic.CreatedAt,
		Uses: []*comatproto.ServerDefs_InviteCodeUse{},
	}
	for i := len(ic.Uses) - 1; i >= 0; i-- {
		v.Uses = append(v.Uses, &comatproto.ServerDefs_InviteCodeUse{UsedBy: ic.Uses[i].UsedBy, UsedAt: ic.Uses[i].UsedAt})
	}
	return v
}
