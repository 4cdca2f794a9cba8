package pds_test

import (
	"context"
	"fmt"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/fakepds/fakepds/pds"
)

// A server with a temporary data dir, fsync off and handles under .test,
// answering on a loopback port as soon as Start returns.
func Example() {
	srv, err := pds.New(pds.Config{})
	if err != nil {
		panic(err)
	}
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Close() // removes the temporary data dir

	out, err := comatproto.ServerDescribeServer(context.Background(), atclient.NewAPIClient(srv.URL()))
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Did, out.AvailableUserDomains, srv.Fsync())
	// Output: did:web:localhost [.test] false
}
