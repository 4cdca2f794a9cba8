package repo_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/atdata"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
)

// A repo is created in an account's actor store, written through a Writer
// (one per open store) inside the store's write transactions, and read
// from its readers.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "repo-example")
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, filepath.Join(dir, "actor.sqlite"), store.Options{Migrations: actorstore.Migrations})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	w, err := repo.NewWriter(ctx, db.Writer())
	if err != nil {
		panic(err)
	}
	defer w.Close()

	did := syntax.DID("did:plc:ewvi7nxzyoun6zhxrhs64oiz")
	key, _ := atcrypto.GeneratePrivateKeyK256()
	post, _ := atdata.MarshalCBOR(map[string]any{"$type": "app.bsky.feed.post", "text": "hello", "createdAt": "2025-01-01T00:00:00Z"})

	var c *repo.Commit
	err = db.Write(ctx, func(tx *sql.Tx) error {
		_, err := repo.Create(ctx, tx, did, key, time.Now())
		return err
	})
	if err != nil {
		panic(err)
	}
	err = db.Write(ctx, func(tx *sql.Tx) error {
		c, err = w.Apply(ctx, tx, did, key, []repo.Write{
			{Action: repo.ActionCreate, Collection: "app.bsky.feed.post", RKey: "3l4qpz7ajrc2a", Value: post},
		}, nil, time.Now())
		return err
	})
	if err != nil {
		panic(err)
	}
	for _, op := range c.Ops {
		fmt.Println(op.Action, op.Path)
	}
	fmt.Println(c.Results[0].URI)

	// The #commit event is what a relay checks.
	ev := c.CommitEvent()
	ev.Seq, ev.Time = 1, syntax.DatetimeNow().String()
	if _, err := indigorepo.VerifyCommitMessage(ctx, ev); err != nil {
		panic(err)
	}

	_, value, err := repo.GetRecord(ctx, db.Reader(), "app.bsky.feed.post", "3l4qpz7ajrc2a", nil)
	if err != nil {
		panic(err)
	}
	rec, _ := atdata.UnmarshalCBOR(value)
	fmt.Println(rec["text"])
	// Output:
	// create app.bsky.feed.post/3l4qpz7ajrc2a
	// at://did:plc:ewvi7nxzyoun6zhxrhs64oiz/app.bsky.feed.post/3l4qpz7ajrc2a
	// hello
}
