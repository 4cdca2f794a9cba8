package pds

import (
	"net/http"

	comatproto "github.com/bluesky-social/indigo/api/atproto"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/xrpc"
)

func (s *Server) registerAppPasswords(x *xrpc.Mux) {
	handleInput(s, x, "com.atproto.server.createAppPassword", xrpc.JSONLimit, accessFull, s.createAppPassword)
	s.handle(x, xrpc.Query, "com.atproto.server.listAppPasswords", access(scopesStandard, check{}), s.listAppPasswords)
	handleInput(s, x, "com.atproto.server.revokeAppPassword", xrpc.JSONLimit, access(scopesStandard, check{}), s.revokeAppPassword)
}

// createAppPassword: only a full password session may make app passwords.
func (s *Server) createAppPassword(w http.ResponseWriter, r *http.Request, c *caller, in *comatproto.ServerCreateAppPassword_Input) error {
	// Names are taken as sent, unchecked, as the reference does.
	name := in.Name
	privileged := in.Privileged != nil && *in.Privileged
	secret := account.NewAppPasswordSecret(s.rand("app-passwords"))
	hash, err := s.hasher.HashAppPassword(c.DID, secret)
	if err != nil {
		return err
	}
	// A name in use is a 500, as in the reference (whose insert fails on
	// the primary key); see docs/known-differences.md.
	ap, err := s.accounts.CreateAppPassword(r.Context(), c.DID, name, hash, privileged, s.clock.Now())
	if err != nil {
		return err
	}
	priv := ap.Privileged
	xrpc.WriteJSON(w, http.StatusOK, comatproto.ServerCreateAppPassword_AppPassword{
		Name: ap.Name, Password: secret, CreatedAt: ap.CreatedAt, Privileged: &priv,
	})
	return nil
}

func (s *Server) listAppPasswords(w http.ResponseWriter, r *http.Request, c *caller) error {
	list, err := s.accounts.ListAppPasswords(r.Context(), c.DID)
	if err != nil {
		return err
	}
	out := comatproto.ServerListAppPasswords_Output{Passwords: []*comatproto.ServerListAppPasswords_AppPassword{}}
	for _, ap := range list {
		priv := ap.Privileged
		out.Passwords = append(out.Passwords, &comatproto.ServerListAppPasswords_AppPassword{Name: ap.Name, CreatedAt: ap.CreatedAt, Privileged: &priv})
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) revokeAppPassword(w http.ResponseWriter, r *http.Request, c *caller, in *comatproto.ServerRevokeAppPassword_Input) error {
	if err := s.accounts.RevokeAppPassword(r.Context(), c.DID, in.Name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}
