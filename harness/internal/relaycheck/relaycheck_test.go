package relaycheck

import (
	"net"
	"strconv"
	"strings"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/bluesky-social/indigo/cmd/relay/relay"

	"github.com/fakepds/fakepds/pds"
)

// A relay learns a new account's PDS from its DID document, through the
// PLC directory, and checks the host before it crawls (relay.ParseHostname).
// fakepds publishes http://localhost:PORT by default, and the host as
// given otherwise, so both pass; an IP would not (the relay answers "not a
// public hostname"), which is why the default is localhost.
func TestRelayAcceptsThePDSEndpoint(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	for _, tc := range []struct {
		name string
		addr string
		want string // the host the relay keeps; "" for any localhost:PORT
	}{
		{"default address", "", ""},
		{"given as localhost:PORT", "localhost:" + port, "localhost:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pds.New(pds.Config{Addr: tc.addr})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			email, pw := "relay@example.com", "pw"
			a, err := comatproto.ServerCreateAccount(t.Context(), atclient.NewAPIClient(p.URL()), &comatproto.ServerCreateAccount_Input{Handle: "relaycheck.test", Email: &email, Password: &pw})
			if err != nil {
				t.Fatal(err)
			}
			ident, err := (&identity.BaseDirectory{PLCURL: p.PLCURL()}).LookupDID(t.Context(), syntax.DID(a.Did))
			if err != nil {
				t.Fatal(err)
			}
			endpoint := ident.PDSEndpoint()
			host, noSSL, err := relay.ParseHostname(endpoint)
			if err != nil {
				t.Fatalf("the relay refuses the PDS endpoint %q: %v", endpoint, err)
			}
			if !noSSL || !strings.HasPrefix(host, "localhost:") || tc.want != "" && host != tc.want || "http://"+host != p.URL() {
				t.Fatalf("relay.ParseHostname(%q) = %q, noSSL %v; the PDS answers at %s", endpoint, host, noSSL, p.URL())
			}
		})
	}
	// What the relay would say to an IP, as fakepds published before.
	if _, _, err := relay.ParseHostname("http://127.0.0.1:" + port); err == nil {
		t.Fatal("the relay accepts an IP host: the reason for the localhost default is gone")
	}
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
