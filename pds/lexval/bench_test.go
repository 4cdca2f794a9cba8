package lexval

import (
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// A post as clients write them: text with a mention facet, a language, an
// image.
var benchPost = []byte(`{"$type":"app.bsky.feed.post","text":"hello @alice.test, look at this","createdAt":"2024-05-01T12:34:56.789Z","langs":["en"],` +
	`"facets":[{"index":{"byteStart":6,"byteEnd":17},"features":[{"$type":"app.bsky.richtext.facet#mention","did":"did:plc:w4xbfzo7kqfes5zb7r6qv3rw"}]}],` +
	`"embed":{"$type":"app.bsky.embed.images","images":[{"alt":"a cat","image":{"$type":"blob","ref":{"$link":"bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"},"mimeType":"image/jpeg","size":123456},"aspectRatio":{"width":800,"height":600}}]}}`)

// BenchmarkPrepare is the write path's cost for a typical post with
// validation (validate unset).
func BenchmarkPrepare(b *testing.B) {
	if _, err := Prepare("app.bsky.feed.post", "3l4b6g6qbvs2a", benchPost, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Prepare("app.bsky.feed.post", "3l4b6g6qbvs2a", benchPost, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepareNoValidate is the same post with validate=false.
func BenchmarkPrepareNoValidate(b *testing.B) {
	no := false
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Prepare("app.bsky.feed.post", "3l4b6g6qbvs2a", benchPost, &no); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCatalogLoad is the most the lexicons cost a process: the path
// index (built on first use) and every record type compiled (each is
// compiled when first written).
func BenchmarkCatalogLoad(b *testing.B) {
	var records []string
	c := newCatalog()
	for nsid := range c.paths {
		if n, err := c.record(nsid); err != nil {
			b.Fatal(err)
		} else if n != nil {
			records = append(records, nsid)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		c := newCatalog()
		for _, nsid := range records {
			if _, err := c.record(nsid); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(records)), "records")
}

// BenchmarkCatalogFirstPost is what the first post of a process pays for
// the catalog: the index and the post's schema.
func BenchmarkCatalogFirstPost(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		c := newCatalog()
		if n, err := c.record("app.bsky.feed.post"); err != nil || n == nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkRecordJSON(b *testing.B) {
	rec, err := Prepare(syntax.NSID("app.bsky.feed.post"), "3l4b6g6qbvs2a", benchPost, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RecordJSON(rec.CBOR); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckInput is the front door's check of a createRecord body
// holding the post of BenchmarkPrepare (the record is held to the data
// model here; Prepare validates it against its own lexicon after).
func BenchmarkCheckInput(b *testing.B) {
	body := []byte(`{"repo":"did:plc:w4xbfzo7kqfes5zb7r6qv3rw","collection":"app.bsky.feed.post","record":` + string(benchPost) + `}`)
	if _, err := CheckInput("com.atproto.repo.createRecord", body); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CheckInput("com.atproto.repo.createRecord", body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckParams is the front door's check of a getRecord query.
func BenchmarkCheckParams(b *testing.B) {
	const q = "repo=did%3Aplc%3Aw4xbfzo7kqfes5zb7r6qv3rw&collection=app.bsky.feed.post&rkey=3l4b6g6qbvs2a"
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckParams("com.atproto.repo.getRecord", q); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepareApplyWrites is an applyWrites body of 200 creates (the
// most the reference takes) checked at the front door, then each record
// prepared from the parsed body, as the handler does.
func BenchmarkPrepareApplyWrites(b *testing.B) {
	body := applyWritesOfPosts(200)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		in, err := CheckInput("com.atproto.repo.applyWrites", body)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 200 {
			v, ok := in.Record("writes", i, "value")
			if !ok {
				b.Fatal("no record", i)
			}
			if _, err := PrepareValue(i, "app.bsky.feed.post", "3l4b6g6qbvs2a", v, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// applyWritesOfPosts is an applyWrites body of n creates of benchPost.
func applyWritesOfPosts(n int) []byte {
	body := []byte(`{"repo":"did:plc:w4xbfzo7kqfes5zb7r6qv3rw","writes":[`)
	for i := range n {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"$type":"com.atproto.repo.applyWrites#create","collection":"app.bsky.feed.post","value":`...)
		body = append(append(body, benchPost...), '}')
	}
	return append(body, "]}"...)
}
