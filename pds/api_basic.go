package pds

import (
	"fmt"
	"html"
	"net/http"

	"github.com/fakepds/fakepds/pds/xrpc"
)

// health answers /xrpc/_health as the reference does: the version, after
// checking that the account database answers; 503 when it does not.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if err := s.accounts.Ping(r.Context()); err != nil {
		s.log.Error("health check failed", "err", err)
		xrpc.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"version": Version, "error": "Service Unavailable"})
		return
	}
	xrpc.WriteJSON(w, http.StatusOK, map[string]string{"version": Version})
}

func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("This is fakepds, an AT Protocol PDS for tests (https://github.com/fakepds/fakepds).\n\nMost API routes are under /xrpc/\n"))
}

func (s *Server) robots(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("# fakepds is a test server\nUser-agent: *\nDisallow: /\n"))
}

// notFound answers a path the server does not serve as the reference's
// Express does: an HTML page naming the method and path.
func notFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n</head>\n<body>\n<pre>Cannot %s %s</pre>\n</body>\n</html>\n",
		r.Method, html.EscapeString(r.URL.Path))
}
