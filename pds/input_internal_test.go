package pds

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"

	"github.com/fakepds/fakepds/pds/lexval"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// inputCases are inputs of the repo writes, the lexicon's and not: escapes
// in keys and values, duplicate keys (the last wins), null and absent
// optionals, extra keys, keys in other cases.
var inputCases = map[string][]string{
	"com.atproto.repo.createRecord": {
		`{"repo":"did:plc:abcdefghijklmnopqrstuvwx","collection":"app.bsky.feed.post","record":{"text":"hi","createdAt":"2024-01-01T00:00:00Z"}}`,
		`{"re\u0070o":"did:plc:abcdefghijklmnopqrstuvwx","collection":"app.bsky.feed.\u0070ost","rkey":"self","validate":false,"record":{}}`,
		`{"repo":"alice.test","repo":"bob.test","collection":"a.b.c","collection":"x.y.z","record":{"a":1},"record":{"b":[1,{"c":null}]}}`,
		`{"repo":"alice.test","collection":"a.b.c","rkey":null,"validate":null,"swapCommit":null,"record":{}}`,
		`{"repo":"alice.test","collection":"a.b.c","validate":true,"swapCommit":"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm","record":{},"extra":{"x":[1,2]}}`,
		`{"Repo":"alice.test","repo":"alice.test","collection":"a.b.c","record":{}}`,
		`{"repo":5,"collection":"a.b.c","record":{}}`,
		`{"repo":"alice.test","collection":"a.b.c","record":[]}`,
		`{"repo":"alice.test","collection":"a.b.c","validate":"true","record":{}}`,
		` {"repo":"alice.test","collection":"a.b.c","record":{"s":"\ud83d\ude00 \u2028 <&>"}} `,
		`[]`,
		`{}`,
	},
	"com.atproto.repo.putRecord": {
		`{"repo":"did:plc:abcdefghijklmnopqrstuvwx","collection":"app.bsky.actor.profile","rkey":"self","record":{}}`,
		`{"repo":"alice.test","collection":"a.b.c","rkey":"self","swapRecord":null,"record":{}}`,
		`{"repo":"alice.test","collection":"a.b.c","rkey":"self","swapRecord":"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm","swapRecord":null,"record":{}}`,
		`{"repo":"alice.test","collection":"a.b.c","rkey":"self","swapRecord":null,"swapRecord":"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm","record":{}}`,
		`{"repo":"alice.test","collection":"a.b.c","rkey":"self","swapRecord":"\u0062afyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm","swapCommit":"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm","record":{}}`,
		`{"repo":"alice.test","collection":"a.b.c","rkey":"self","swapRecord":5,"record":{}}`,
		`{"repo":"alice.test","collection":"a.b.c","record":{}}`,
	},
	"com.atproto.repo.deleteRecord": {
		`{"repo":"did:plc:abcdefghijklmnopqrstuvwx","collection":"app.bsky.feed.post","rkey":"3l4b6g6qbvs2a"}`,
		`{"repo":"alice.test","collection":"a.b.c","rkey":"self","swapRecord":null,"swapCommit":null}`,
		`{"repo":"alice.test","collection":"a.b.c","rkey":"self","swapRecord":"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm","swapCommit":"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm","x":1}`,
		`{"repo":"alice.test","collection":"a.b.c","rkey":"se\u006cf","rkey":"other"}`,
	},
	"com.atproto.repo.applyWrites": {
		`{"repo":"did:plc:abcdefghijklmnopqrstuvwx","writes":[{"$type":"com.atproto.repo.applyWrites#create","collection":"app.bsky.feed.post","value":{"text":"a","createdAt":"2024-01-01T00:00:00Z"}}]}`,
		`{"repo":"alice.test","validate":false,"swapCommit":"bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm","writes":[{"$type":"com.atproto.repo.applyWrites#create","collection":"a.b.c","rkey":"k1","value":{}},{"$type":"com.atproto.repo.applyWrites#update","collection":"a.b.c","rkey":"k2","value":{"x":1},"value":{"y":2}},{"$type":"com.atproto.repo.applyWrites#delete","collection":"a.b.c","rkey":"k3","value":{}}]}`,
		`{"repo":"alice.test","writes":[]}`,
		`{"repo":"alice.test","writes":null}`,
		`{"repo":"alice.test","writes":[null]}`,
		`{"repo":"alice.test","writes":[{"$type":"com.atproto.repo.applyWrites#create","collection":"a.b.c","rkey":null,"value":{}}],"writes":[{"$type":"com.atproto.repo.applyWrites#delete","collection":"x.y.z","rkey":"k"}]}`,
		`{"repo":"alice.test","writes":[{"$type":"com.atproto.repo.applyWrites#create","Collection":"a.b.c","collection":"a.b.c","value":{}}]}`,
		`{"repo":"alice.test","writes":{}}`,
	},
}

// oldRecordWriteInput is recordWriteInput as json.Unmarshal read it
// before ReadInput.
type oldRecordWriteInput struct {
	Repo       string          `json:"repo"`
	Collection string          `json:"collection"`
	RKey       *string         `json:"rkey"`
	Validate   *bool           `json:"validate"`
	SwapCommit *string         `json:"swapCommit"`
	SwapRecord json.RawMessage `json:"swapRecord"`
}

// checkReadInput: what ReadInput reads of an input the lexicon passes is
// what json.Unmarshal read (the inputs' records aside, which were read
// from the same parse before as now).
func checkReadInput(t *testing.T, nsid, body string) {
	t.Helper()
	checked, err := lexval.CheckInput(nsid, []byte(body))
	if err != nil {
		return // refused before any decoding
	}
	var got, want any
	var readErr error
	switch nsid {
	case "com.atproto.repo.createRecord", "com.atproto.repo.putRecord":
		var in recordWriteInput
		readErr = in.ReadInput(checked)
		var old oldRecordWriteInput
		if err := json.Unmarshal([]byte(body), &old); err != nil {
			t.Fatalf("%s: json.Unmarshal: %v", body, err)
		}
		if rec, _ := checked.Record("record"); !reflect.DeepEqual(in.record, rec) {
			t.Errorf("%s: record %v, want %v", body, in.record, rec)
		}
		if null := string(old.SwapRecord) == "null"; in.SwapRecordNull != null {
			t.Errorf("%s: SwapRecordNull %v, want %v", body, in.SwapRecordNull, null)
		}
		var swap *string
		if len(old.SwapRecord) > 0 && string(old.SwapRecord) != "null" {
			swap = new(string)
			if err := json.Unmarshal(old.SwapRecord, swap); err != nil {
				t.Fatal(err)
			}
		}
		got = []any{in.Repo, in.Collection, in.RKey, in.Validate, in.SwapCommit, in.SwapRecord}
		want = []any{old.Repo, old.Collection, old.RKey, old.Validate, old.SwapCommit, swap}
	case "com.atproto.repo.deleteRecord":
		var in deleteRecordInput
		readErr = in.ReadInput(checked)
		var old comatproto.RepoDeleteRecord_Input
		if err := json.Unmarshal([]byte(body), &old); err != nil {
			t.Fatalf("%s: json.Unmarshal: %v", body, err)
		}
		got = []any{in.Collection, in.Repo, in.Rkey, in.SwapCommit, in.SwapRecord}
		want = []any{old.Collection, old.Repo, old.Rkey, old.SwapCommit, old.SwapRecord}
	case "com.atproto.repo.applyWrites":
		var in, old applyWritesInput
		readErr = in.ReadInput(checked)
		if err := json.Unmarshal([]byte(body), &old); err != nil {
			t.Fatalf("%s: json.Unmarshal: %v", body, err)
		}
		for i := range in.Writes {
			if v, _ := checked.Record("writes", i, "value"); !reflect.DeepEqual(in.Writes[i].value, v) {
				t.Errorf("%s: writes[%d].value %v, want %v", body, i, in.Writes[i].value, v)
			}
			in.Writes[i].value = lexval.Value{}
		}
		got, want = in, old
	default:
		t.Fatalf("no input type for %s", nsid)
	}
	if readErr != nil {
		t.Fatalf("%s: ReadInput: %v", body, readErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\nReadInput    %s\njson.Unmarshal %s", body, show(got), show(want))
	}
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestReadInput(t *testing.T) {
	t.Parallel()
	passed := 0
	for nsid, bodies := range inputCases {
		for _, body := range bodies {
			checkReadInput(t, nsid, body)
			if _, err := lexval.CheckInput(nsid, []byte(body)); err == nil {
				passed++
			}
		}
	}
	t.Logf("%d inputs passed their lexicon", passed)
	if passed < 15 {
		t.Errorf("only %d inputs passed their lexicon: the test checks little", passed)
	}
	// The types the mux reads with ReadInput.
	for _, v := range []any{&recordWriteInput{}, &deleteRecordInput{}, &applyWritesInput{}} {
		if _, ok := v.(xrpc.InputReader); !ok {
			t.Errorf("%T is not an xrpc.InputReader", v)
		}
	}
}

func FuzzReadInput(f *testing.F) {
	for nsid, bodies := range inputCases {
		for _, body := range bodies {
			f.Add(strings.TrimPrefix(nsid, "com.atproto.repo."), body)
		}
	}
	f.Fuzz(func(t *testing.T, method, body string) {
		nsid := "com.atproto.repo." + method
		if _, ok := inputCases[nsid]; !ok {
			return
		}
		checkReadInput(t, nsid, body)
	})
}
