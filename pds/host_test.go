package pds_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
)

// URL names the server by the host it was asked to listen on, as given;
// the default is localhost, as the reference's dev-env publishes itself. The
// DID documents name the same URL, or Config.PublicURL.
func TestURLNamesTheListenHost(t *testing.T) {
	for _, tc := range []struct {
		name, addr, public, wantHost, wantEndpointHost string
	}{
		{"default", "", "", "localhost", "localhost"},
		{"localhost given", "localhost:0", "", "localhost", "localhost"},
		{"an IP stays an IP", "127.0.0.1:0", "", "127.0.0.1", "127.0.0.1"},
		{"wildcard", ":0", "", "localhost", "localhost"},
		{"public URL", "", "https://pds.example.com", "localhost", "pds.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, pds.Config{Addr: tc.addr, PLCAddr: tc.addr, PublicURL: tc.public})
			for what, u := range map[string]string{"URL": s.URL(), "PLCURL": s.PLCURL()} {
				host, port, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
				if err != nil || host != tc.wantHost || port == "0" {
					t.Errorf("%s = %q, want http://%s:PORT", what, u, tc.wantHost)
				}
			}
			a := createAccount(t, s, "hostcheck.test", "hostcheck@example.com", "pw")
			ident, err := (&identity.BaseDirectory{PLCURL: s.PLCURL()}).LookupDID(t.Context(), syntax.DID(a.Did))
			if err != nil {
				t.Fatal(err)
			}
			want := s.URL()
			if tc.public != "" {
				want = tc.public
			}
			if got := ident.PDSEndpoint(); got != want || !strings.Contains(got, tc.wantEndpointHost) {
				t.Errorf("DID document's PDS endpoint %q, want %q", got, want)
			}
			// The service's did:web names the public host, as the reference's
			// PDS_HOSTNAME does; the listen host does not change it.
			desc, err := comatproto.ServerDescribeServer(t.Context(), atclient.NewAPIClient(s.URL()))
			wantDID := "did:web:localhost"
			if tc.public != "" {
				wantDID = "did:web:" + tc.wantEndpointHost
			}
			if err != nil || desc.Did != wantDID {
				t.Errorf("describeServer did = %v, %v; want %s", desc, err, wantDID)
			}
		})
	}
	for _, bad := range []string{"pds.example.com", "ftp://pds.example.com", "https://pds.example.com/xrpc"} {
		if _, err := pds.New(pds.Config{PublicURL: bad}); err == nil {
			t.Errorf("PublicURL %q accepted", bad)
		}
	}
}

// The reference keeps about a thousand first labels from users on its own
// domains (reserved_handles.txt): createAccount and updateHandle refuse
// them with its error, for any case.
func TestReservedHandles(t *testing.T) {
	s := start(t, pds.Config{})
	for _, h := range []string{"admin.test", "Support.test", "bsky.test"} {
		email, pw := strings.ToLower(strings.Split(h, ".")[0])+"@example.com", "pw"
		_, err := comatproto.ServerCreateAccount(t.Context(), atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateAccount_Input{Handle: h, Email: &email, Password: &pw})
		apiErr(t, err, 400, "HandleNotAvailable")
		if ae := (*atclient.APIError)(nil); errors.As(err, &ae) && ae.Message != "Reserved handle" {
			t.Errorf("%s: message %q", h, ae.Message)
		}
	}
	a := createAccount(t, s, "notreserved.test", "notreserved@example.com", "pw")
	err := comatproto.IdentityUpdateHandle(t.Context(), bearer(s, a.AccessJwt), &comatproto.IdentityUpdateHandle_Input{Handle: "admin.test"})
	apiErr(t, err, 400, "HandleNotAvailable")
}
