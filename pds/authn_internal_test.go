package pds

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds/xrpc"
)

// oldAuthHeader is authHeader as it was, with strings.Split and ToUpper.
func oldAuthHeader(h string) (scheme, token string, err error) {
	if h == "" {
		return "", "", nil
	}
	parts := strings.Split(h, " ")
	if len(parts) != 2 {
		return "", "", xrpc.InvalidRequest("InvalidToken", "Malformed authorization header")
	}
	switch s := strings.ToUpper(parts[0]); s {
	case "BEARER", "BASIC", "DPOP":
		return s, parts[1], nil
	}
	return "", "", xrpc.InvalidRequest("InvalidToken", "Unsupported authorization type: %s", parts[0])
}

func checkAuthHeader(t *testing.T, h string) {
	t.Helper()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", h)
	h = r.Header.Get("Authorization")
	s, tok, err := authHeader(r)
	ws, wtok, werr := oldAuthHeader(h)
	var e, we *xrpc.Error
	errors.As(err, &e)
	errors.As(werr, &we)
	if s != ws || tok != wtok || (e == nil) != (we == nil) || e != nil && *e != *we {
		t.Errorf("authHeader(%q) = %q, %q, %v; want %q, %q, %v", h, s, tok, err, ws, wtok, werr)
	}
}

// TestAuthHeader: authHeader answers as strings.Split and ToUpper did,
// non-ASCII letters that ToUpper makes ASCII ones included.
func TestAuthHeader(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Bearer", "bearer", "BEARER", "bEaReR", "Basic", "DPoP", "dpop", "Token", "", "Bearer ", "baſic", "basıc", "baſıc", "bearer\u212a", "Beare", "Bearerr", "Basi", "DPo", "dpopp", "DPOP\x00"} {
		for _, rest := range []string{"", " ", " tok", " tok en", "  tok", " tok ", " a.b.c"} {
			checkAuthHeader(t, name+rest)
		}
	}
}

func FuzzAuthHeader(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("baſic abc")
	f.Fuzz(checkAuthHeader)
}
