package pds

import (
	"net/http"

	comatproto "github.com/bluesky-social/indigo/api/atproto"

	"github.com/fakepds/fakepds/pds/xrpc"
)

// registerServer adds the com.atproto.server.* methods.
func (s *Server) registerServer(x *xrpc.Mux) {
	x.Handle(xrpc.Query, "com.atproto.server.describeServer", s.describeServer)
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
