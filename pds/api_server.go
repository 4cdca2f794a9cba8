package pds

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// registerServer adds the com.atproto.server.* methods.
func (s *Server) registerServer(x *xrpc.Mux) {
	x.Handle(xrpc.Query, "com.atproto.server.describeServer", s.describeServer)
	x.Handle(xrpc.Query, "com.atproto.server.getServiceAuth", s.getServiceAuth)
}

// ServiceDID is the server's own DID, did:web of its hostname.
func (s *Server) ServiceDID() string { return "did:web:" + s.cfg.Hostname }

// describeServerOutput adds to indigo's type the field the reference PDS
// sends that the lexicon indigo was generated from lacks.
type describeServerOutput struct {
	comatproto.ServerDescribeServer_Output
	BlobUploadLimit int64 `json:"blobUploadLimit"`
}

func (s *Server) describeServer(w http.ResponseWriter, r *http.Request) error {
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

// privilegedLXM reports whether a service auth token for lxm needs a
// privileged session: chat methods and createAccount, as the reference.
func privilegedLXM(lxm string) bool {
	return strings.HasPrefix(lxm, "chat.bsky.") || lxm == "com.atproto.server.createAccount"
}

// protectedLXM are the account-management methods no service auth token
// may be minted for: they must be called directly.
var protectedLXM = map[string]bool{
	"com.atproto.admin.sendEmail":                      true,
	"com.atproto.identity.requestPlcOperationSignature": true,
	"com.atproto.identity.signPlcOperation":             true,
	"com.atproto.identity.updateHandle":                 true,
	"com.atproto.server.activateAccount":                true,
	"com.atproto.server.confirmEmail":                   true,
	"com.atproto.server.createAppPassword":              true,
	"com.atproto.server.deactivateAccount":              true,
	"com.atproto.server.getAccountInviteCodes":          true,
	"com.atproto.server.getSession":                     true,
	"com.atproto.server.listAppPasswords":               true,
	"com.atproto.server.requestAccountDelete":           true,
	"com.atproto.server.requestEmailConfirmation":       true,
	"com.atproto.server.requestEmailUpdate":             true,
	"com.atproto.server.revokeAppPassword":              true,
	"com.atproto.server.updateEmail":                    true,
}

func (s *Server) getServiceAuth(w http.ResponseWriter, r *http.Request) error {
	c, err := s.bearer(r, auth.TypeAccess, append(scopesStandard, auth.ScopeTakendown), check{})
	if err != nil {
		return err
	}
	q := r.URL.Query()
	aud, lxm := q.Get("aud"), q.Get("lxm")
	if aud == "" {
		return xrpc.InvalidRequest("", `Params must have the property "aud"`)
	}
	if !validServiceAudience(aud) {
		return xrpc.InvalidRequest("", "aud must be a valid atproto DID or did#serviceId reference")
	}
	if lxm != "" {
		if _, err := syntax.ParseNSID(lxm); err != nil {
			return xrpc.InvalidRequest("", "lxm must be a valid nsid")
		}
	}
	if c.Scope == auth.ScopeTakendown && lxm != "com.atproto.server.createAccount" {
		return xrpc.InvalidRequest("InvalidToken", "Bad token scope")
	}
	if lxm != "" && privilegedLXM(lxm) && c.Scope != auth.ScopeAccess && c.Scope != auth.ScopeAppPassPrivileged {
		return xrpc.InvalidRequest("", "insufficient access to request a service auth token for the following method: %s", lxm)
	}
	now := s.clock.Now()
	exp := now.Add(time.Minute)
	if v := q.Get("exp"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return xrpc.InvalidRequest("", "exp must be an integer")
		}
		exp = time.Unix(sec, 0)
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
	if protectedLXM[lxm] {
		return xrpc.InvalidRequest("", "cannot request a service auth token for the following protected method: %s", lxm)
	}
	key, err := s.signingKey(r.Context(), c.DID)
	if err != nil {
		return err
	}
	tok, err := auth.ServiceAuth(syntax.DID(c.DID), aud, lxm, now, exp, key)
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
