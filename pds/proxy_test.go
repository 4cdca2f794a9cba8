package pds_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	indigoauth "github.com/bluesky-social/indigo/atproto/auth"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
)

// Methods the PDS does not serve go to the configured appview with a
// service auth token that indigo's validator accepts.
func TestProxyToAppView(t *testing.T) {
	var s *pds.Server
	appview := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lxm := syntax.NSID(strings.TrimPrefix(r.URL.Path, "/xrpc/"))
		v := indigoauth.ServiceAuthValidator{Audience: "did:web:appview.test", Dir: s.Directory()}
		iss, err := v.Validate(r.Context(), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), &lxm)
		if err != nil {
			http.Error(w, `{"error":"BadJwt","message":"`+err.Error()+`"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"feed":[],"viewer":"` + iss.String() + `","limit":"` + r.URL.Query().Get("limit") + `"}`))
	}))
	defer appview.Close()
	s = start(t, pds.Config{AppViewURL: appview.URL, AppViewDID: "did:web:appview.test"})
	a := createAccount(t, s, "viewer.test", "viewer@example.com", "pw")
	var out struct {
		Viewer string `json:"viewer"`
		Limit  string `json:"limit"`
	}
	if err := bearer(s, a.AccessJwt).Get(t.Context(), "app.bsky.feed.getTimeline", map[string]any{"limit": 7}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Viewer != a.Did || out.Limit != "7" {
		t.Fatalf("appview saw %+v", out)
	}
	// Without auth: the reference's 401.
	err := bearer(s, "x").Get(t.Context(), "app.bsky.feed.getTimeline", nil, nil)
	apiErr(t, err, 400, "InvalidToken")
}
