package pds

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// proxyHeaders are the request headers passed on to the appview.
var proxyHeaders = []string{"Accept", "Accept-Language", "Content-Type", "Content-Encoding", "Atproto-Accept-Labelers", "X-Bsky-Topics"}

// proxy forwards a method this server does not serve to the configured
// appview, as the reference does: authenticated as the caller with a
// service auth token (aud the appview's DID, lxm the method) signed by the
// caller's repo key. Without an appview configured, or for a service other
// than it in the atproto-proxy header, it declines and the method answers
// 501.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, nsid string) bool {
	if s.cfg.AppViewURL == "" {
		return false
	}
	if p := r.Header.Get("Atproto-Proxy"); p != "" {
		did, _, _ := strings.Cut(p, "#")
		if did != s.cfg.AppViewDID {
			return false
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		xrpc.WriteError(w, xrpc.InvalidRequest("", "XRPC requests only supports GET and POST"))
		return true
	}
	if protectedLXM[strings.ToLower(nsid)] {
		xrpc.WriteError(w, xrpc.InvalidRequest("InvalidToken", "Bad token method"))
		return true
	}
	c, err := s.accessToken(r, scopesStandard)
	if err != nil {
		xrpc.WriteError(w, err)
		return true
	}
	if privilegedLXM[strings.ToLower(nsid)] && c.Scope != auth.ScopeAccess && c.Scope != auth.ScopeAppPassPrivileged {
		xrpc.WriteError(w, xrpc.InvalidRequest("InvalidToken", "Bad token method"))
		return true
	}
	key, err := s.signingKey(r.Context(), c.DID)
	if err != nil {
		xrpc.WriteError(w, err)
		return true
	}
	now := s.clock.Now()
	tok, err := auth.ServiceAuth(s.rand("service-auth-ids"), syntax.DID(c.DID), s.cfg.AppViewDID, nsid, now, now.Add(time.Minute), key)
	if err != nil {
		xrpc.WriteError(w, err)
		return true
	}
	target := strings.TrimSuffix(s.cfg.AppViewURL, "/") + r.URL.Path
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, target, r.Body)
	if err != nil {
		xrpc.WriteError(w, err)
		return true
	}
	for _, h := range proxyHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			out.Header[h] = v
		}
	}
	out.Header.Set("Authorization", "Bearer "+tok)
	resp, err := s.proxyClient.Do(out)
	if err != nil {
		xrpc.WriteError(w, xrpc.Errorf(http.StatusBadGateway, "UpstreamFailure", "Upstream service unreachable"))
		return true
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Content-Language", "Atproto-Repo-Rev", "Atproto-Content-Labelers"} {
		if v := resp.Header.Values(h); len(v) > 0 {
			w.Header()[h] = v
		}
	}
	status := resp.StatusCode
	if status >= 500 {
		// The reference reports an upstream 5xx as its own 502.
		xrpc.WriteError(w, xrpc.Errorf(http.StatusBadGateway, "UpstreamFailure", "Upstream Failure"))
		return true
	}
	w.WriteHeader(status)
	_, _ = io.Copy(w, resp.Body)
	return true
}
