package plc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"os"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/fakepds/fakepds/pds/plc"
)

// A PDS creates an account's DID, code under test resolves it through the
// PLC URL, and a handle change follows.
func Example() {
	ctx := context.Background()
	dataDir, err := os.MkdirTemp("", "plc-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dataDir)
	d, err := plc.Open(ctx, dataDir, plc.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()

	rotationKey, _ := atcrypto.GeneratePrivateKeyK256() // the PDS's
	signingKey, _ := atcrypto.GeneratePrivateKeyK256()  // the account's repo key
	pub, _ := signingKey.PublicKey()
	did, genesis, err := plc.CreateGenesis(rotationKey, plc.Fields{
		SigningKey: pub.DIDKey(),
		Handle:     "alice.test",
		PDS:        "https://pds.test",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Submit(ctx, did, genesis); err != nil {
		log.Fatal(err)
	}

	// Code under test, as in production, with the PLC URL swapped.
	resolver := identity.BaseDirectory{PLCURL: srv.URL, SkipHandleVerification: true}
	ident, err := resolver.LookupDID(ctx, did)
	if err != nil {
		log.Fatal(err)
	}
	handle, _ := ident.DeclaredHandle()
	fmt.Println(handle, ident.PDSEndpoint())

	last, err := d.Last(ctx, did)
	if err != nil {
		log.Fatal(err)
	}
	update, err := plc.CreateUpdate(last, rotationKey, plc.Fields{Handle: "alice2.test"})
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Submit(ctx, did, update); err != nil {
		log.Fatal(err)
	}
	doc, err := d.Resolve(ctx, did)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(doc.AlsoKnownAs)
	// Output:
	// alice.test https://pds.test
	// [at://alice2.test]
}

// A refusal carries the public directory's status and message, and its
// kind for errors.Is.
func ExampleDirectory_Submit() {
	ctx := context.Background()
	dataDir, err := os.MkdirTemp("", "plc-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dataDir)
	d, err := plc.Open(ctx, dataDir, plc.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	key, _ := atcrypto.GeneratePrivateKeyK256()
	did, genesis, err := plc.CreateGenesis(key, plc.Fields{Handle: "bob.test"})
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Submit(ctx, did, genesis); err != nil {
		log.Fatal(err)
	}
	err = d.Submit(ctx, did, genesis) // the DID exists: a genesis cannot follow
	var opErr *plc.OpError
	if errors.As(err, &opErr) {
		fmt.Println(errors.Is(err, plc.ErrMisordered), opErr.Status, opErr.Message)
	}
	// Output:
	// true 400 Operations not correctly ordered
}
