package blob_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/fakepds/fakepds/pds/blob"
)

// TestSniffMatchesReference replays what the reference's sniffer (npm
// file-type 22, run by testdata/sniff_golden.mjs) answered for crafted
// headers of every format it knows, text, and random bytes.
func TestSniffMatchesReference(t *testing.T) {
	raw, err := os.ReadFile("testdata/sniff_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name, Hex, Mime string
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 1000 {
		t.Fatalf("only %d golden cases", len(cases))
	}
	fails := 0
	for _, c := range cases {
		b, err := hex.DecodeString(c.Hex)
		if err != nil {
			t.Fatal(err)
		}
		got := blob.Sniff(bytes.NewReader(b), int64(len(b)))
		if got != c.Mime {
			fails++
			if fails <= 40 {
				t.Errorf("%s (%.40s): got %q, reference %q", c.Name, c.Hex, got, c.Mime)
			}
		}
	}
	if fails > 0 {
		t.Errorf("%d of %d cases differ", fails, len(cases))
	}
}
