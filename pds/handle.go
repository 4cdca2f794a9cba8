package pds

import (
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/xrpc"
)

// handleFormat is the lexicon's format check of a handle input, which the
// reference runs on the body before any handle rule.
func handleFormat(raw string) error {
	if _, err := syntax.ParseHandle(raw); err != nil {
		return xrpc.InvalidRequest("", "Invalid handle (got %q) at $.handle", raw)
	}
	return nil
}

// normalizeHandle lower-cases and validates a handle as the reference does
// for account creation (forNew) and handle updates: the syntax (indigo's
// syntax.ParseHandle decides; the message says why, in the reference's
// words), the TLD, and, under one of the server's domains, a single label
// of 3 to 18 characters. A new account must use a server domain.
func (s *Server) normalizeHandle(raw string, forNew bool) (syntax.Handle, error) {
	lower := strings.ToLower(raw)
	h, err := syntax.ParseHandle(lower)
	if err != nil {
		return "", xrpc.InvalidRequest("InvalidHandle", "%s", handleSyntaxProblem(lower))
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
	}
	return h, nil
}

// handleSyntaxProblem names the first rule an invalid handle breaks, in the
// order the reference checks them.
func handleSyntaxProblem(h string) string {
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return "Disallowed characters in handle (ASCII letters, digits, dashes, periods only)"
		}
	}
	if len(h) > 253 {
		return "Handle is too long (253 chars max)"
	}
	labels := strings.Split(h, ".")
	if len(labels) < 2 {
		return "Handle domain needs at least two parts"
	}
	for i, l := range labels {
		switch {
		case l == "":
			return "Handle parts can not be empty"
		case len(l) > 63:
			return "Handle part too long (max 63 chars)"
		case strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-"):
			return "Handle parts can not start or end with hyphens"
		case i == len(labels)-1 && !(l[0] >= 'a' && l[0] <= 'z' || l[0] >= 'A' && l[0] <= 'Z'):
			return "Handle final component (TLD) must start with ASCII letter"
		}
	}
	return "Handle didn't validate via regex"
}
