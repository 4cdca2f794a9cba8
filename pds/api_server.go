package pds

import (
	"net/http"
	"strings"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// registerServer adds the com.atproto.server.* methods.
func (s *Server) registerServer(x *xrpc.Mux) {
	s.handle(x, xrpc.Query, "com.atproto.server.describeServer", noAuth, s.describeServer)
	s.handle(x, xrpc.Query, "com.atproto.server.getServiceAuth", access(append(scopesStandard, auth.ScopeTakendown), check{}), s.getServiceAuth)
}

// ServiceDID is the server's own DID, did:web of its hostname.
func (s *Server) ServiceDID() string { return "did:web:" + s.cfg.Hostname }

// describeServerOutput adds to indigo's type the field the reference PDS
// sends that the lexicon indigo was generated from lacks.
type describeServerOutput struct {
	comatproto.ServerDescribeServer_Output
	BlobUploadLimit int64 `json:"blobUploadLimit"`
}

func (s *Server) describeServer(w http.ResponseWriter, r *http.Request, _ *caller) error {
	invite := s.cfg.InviteRequired
	out := describeServerOutput{
		ServerDescribeServer_Output: comatproto.ServerDescribeServer_Output{
			Did:                  s.ServiceDID(),
			AvailableUserDomains: s.cfg.HandleDomains,
			InviteCodeRequired:   &invite,
			Links:                &comatproto.ServerDescribeServer_Links{},
			Contact:              &comatproto.ServerDescribeServer_Contact{},
		},
		BlobUploadLimit: s.cfg.BlobUploadLimit,
	}
	if v := s.cfg.PrivacyPolicyURL; v != "" {
		out.Links.PrivacyPolicy = &v
	}
	if v := s.cfg.TermsOfServiceURL; v != "" {
		out.Links.TermsOfService = &v
	}
	if v := s.cfg.ContactEmail; v != "" {
		out.Contact.Email = &v
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

// privilegedLXM are the methods a service auth token needs a privileged
// session for: createAccount and the chat methods that read or change
// messages. Keys are lower case: the reference compares without case.
var privilegedLXM = lowerSet(
	"com.atproto.server.createAccount",
	"chat.bsky.actor.deleteAccount", "chat.bsky.actor.exportAccountData",
	"chat.bsky.convo.deleteMessageForSelf", "chat.bsky.convo.getConvo", "chat.bsky.convo.getConvoForMembers",
	"chat.bsky.convo.getLog", "chat.bsky.convo.getMessages", "chat.bsky.convo.leaveConvo",
	"chat.bsky.convo.listConvos", "chat.bsky.convo.muteConvo", "chat.bsky.convo.sendMessage",
	"chat.bsky.convo.sendMessageBatch", "chat.bsky.convo.unmuteConvo", "chat.bsky.convo.updateRead",
)

func lowerSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[strings.ToLower(n)] = true
	}
	return m
}

// protectedLXM are the account-management methods no service auth token
// may be minted for: they must be called directly.
var protectedLXM = lowerSet(
	"com.atproto.admin.sendEmail",
	"com.atproto.identity.requestPlcOperationSignature",
	"com.atproto.identity.signPlcOperation",
	"com.atproto.identity.updateHandle",
	"com.atproto.server.activateAccount",
	"com.atproto.server.confirmEmail",
	"com.atproto.server.createAppPassword",
	"com.atproto.server.deactivateAccount",
	"com.atproto.server.getAccountInviteCodes",
	"com.atproto.server.getSession",
	"com.atproto.server.listAppPasswords",
	"com.atproto.server.requestAccountDelete",
	"com.atproto.server.requestEmailConfirmation",
	"com.atproto.server.requestEmailUpdate",
	"com.atproto.server.revokeAppPassword",
	"com.atproto.server.updateEmail",
)

func (s *Server) getServiceAuth(w http.ResponseWriter, r *http.Request, c *caller) error {
	aud, lxm, expSec := param(r, "aud"), param(r, "lxm"), int64(paramInt(r, "exp", 0))
	if !validServiceAudience(aud) {
		return xrpc.InvalidRequest("", "aud must be a valid atproto DID or did#serviceId reference")
	}
	if c.Scope == auth.ScopeTakendown && lxm != "com.atproto.server.createAccount" {
		return xrpc.InvalidRequest("InvalidToken", "Bad token scope")
	}
	if privilegedLXM[strings.ToLower(lxm)] && c.Scope != auth.ScopeAccess && c.Scope != auth.ScopeAppPassPrivileged {
		return xrpc.InvalidRequest("", "insufficient access to request a service auth token for the following method: %s", lxm)
	}
	now := s.clock.Now()
	exp := now.Add(time.Minute)
	if expSec != 0 { // 0 counts as absent, as in the reference
		exp = time.Unix(expSec, 0)
		diff := exp.Sub(now)
		switch {
		case diff < 0:
			return xrpc.InvalidRequest("BadExpiration", "expiration is in past")
		case diff > time.Hour:
			return xrpc.InvalidRequest("BadExpiration", "cannot request a token with an expiration more than an hour in the future")
		case lxm == "" && diff > time.Minute:
			return xrpc.InvalidRequest("BadExpiration", "cannot request a method-less token with an expiration more than a minute in the future")
		}
	}
	if protectedLXM[strings.ToLower(lxm)] {
		return xrpc.InvalidRequest("", "cannot request a service auth token for the following protected method: %s", lxm)
	}
	key, err := s.signingKey(r.Context(), c.DID)
	if err != nil {
		return err
	}
	tok, err := auth.ServiceAuth(s.rand("service-auth-ids"), syntax.DID(c.DID), aud, lxm, now, exp, key)
	if err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, comatproto.ServerGetServiceAuth_Output{Token: tok})
	return nil
}

// validServiceAudience accepts an atproto DID (did:plc, did:web) or a
// did#service reference.
func validServiceAudience(aud string) bool {
	did, frag, hasFrag := strings.Cut(aud, "#")
	if hasFrag && frag == "" {
		return false
	}
	d, err := syntax.ParseDID(did)
	if err != nil {
		return false
	}
	return d.Method() == "plc" || d.Method() == "web"
}
