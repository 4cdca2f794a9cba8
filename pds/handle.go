package pds

import (
	_ "embed"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/xrpc"
)

// normalizeHandle lower-cases and validates a handle as the reference does
// for account creation (forNew) and handle updates: the syntax (indigo's
// syntax.ParseHandle decides; the message says why, in the reference's
// words), the TLD, and, under one of the server's domains, a single label
// of 3 to 18 characters that the reference does not reserve. A new account
// must use a server domain.
func (s *Server) normalizeHandle(raw string, forNew bool) (syntax.Handle, error) {
	lower := strings.ToLower(raw)
	h, err := syntax.ParseHandle(lower)
	if err != nil {
		// The lexicon checked raw's format before any handler ran; this
		// only keeps the function safe on its own.
		return "", xrpc.InvalidRequest("InvalidHandle", "Invalid handle: %v", err)
	}
	if !h.AllowedTLD() {
		return "", xrpc.InvalidRequest("InvalidHandle", "Handle TLD is invalid or disallowed")
	}
	domain := ""
	for _, d := range s.cfg.HandleDomains {
		if strings.HasSuffix(lower, d) {
			domain = d
			break
		}
	}
	if domain == "" {
		if forNew {
			return "", xrpc.InvalidRequest("UnsupportedDomain", "Not a supported handle domain")
		}
		return h, nil
	}
	front := strings.TrimSuffix(lower, domain)
	switch {
	case strings.Contains(front, "."):
		return "", xrpc.InvalidRequest("InvalidHandle", "Invalid characters in handle")
	case len(front) < 3:
		return "", xrpc.InvalidRequest("InvalidHandle", "Handle too short")
	case len(front) > 18:
		return "", xrpc.InvalidRequest("InvalidHandle", "Handle too long")
	case reservedHandles[front]:
		return "", xrpc.InvalidRequest("HandleNotAvailable", "Reserved handle")
	}
	return h, nil
}

//go:embed reserved_handles.txt
var reservedHandlesTxt string

// reservedHandles are the first labels the reference keeps from users on
// its own domains (reserved_handles.txt says where the list comes from).
var reservedHandles = func() map[string]bool {
	m := map[string]bool{}
	for line := range strings.Lines(reservedHandlesTxt) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			m[line] = true
		}
	}
	return m
}()
