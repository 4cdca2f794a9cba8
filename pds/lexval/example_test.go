package lexval_test

import (
	"errors"
	"fmt"

	"github.com/fakepds/fakepds/pds/lexval"
)

func ExamplePrepare() {
	post := []byte(`{"text":"hello","createdAt":"2024-05-01T12:34:56.789Z"}`)
	rec, err := lexval.Prepare("app.bsky.feed.post", "3l4b6g6qbvs2a", post, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Status, rec.CID, len(rec.Blobs))

	_, err = lexval.Prepare("app.bsky.feed.post", "3l4b6g6qbvs2a", []byte(`{"text":123}`), nil)
	var e *lexval.Error
	if errors.As(err, &e) {
		fmt.Println(e.Message)
	}
	// Output:
	// valid bafyreidwugguupfx2rlnbo4nusrol7yw25gyxta3afbz6qvu5sjg6flrj4 0
	// Invalid app.bsky.feed.post record: Expected string value type (got 123) at $.record.text
}

func ExamplePrepareWrite() {
	validate := true
	_, err := lexval.PrepareWrite(1, "com.example.thing", "3l4b6g6qbvs2a", []byte(`{}`), &validate)
	fmt.Println(err)
	// Output:
	// Unknown lexicon type: com.example.thing
}

func ExampleRecordJSON() {
	rec, err := lexval.Prepare("com.example.thing", "3l4b6g6qbvs2a", []byte(
		`{"img":{"$type":"blob","ref":{"$link":"bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"},"mimeType":"image/png","size":3},"sig":{"$bytes":"AQID"}}`), nil)
	if err != nil {
		panic(err)
	}
	out, err := lexval.RecordJSON(rec.CBOR)
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Status, rec.Blobs[0].Ref)
	fmt.Println(string(out))
	// Output:
	// unknown bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy
	// {"img":{"ref":{"$link":"bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"},"size":3,"$type":"blob","mimeType":"image/png"},"sig":{"$bytes":"AQID"},"$type":"com.example.thing"}
}
