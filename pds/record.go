package pds

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/fakepds/fakepds/pds/lexval"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// recordValue is a record ready for the repo: DAG-CBOR, its blob refs and
// its validation status ("" when validation was skipped).
type recordValue struct {
	cbor   []byte
	blobs  []atdata.Blob
	status string
}

// prepareRecordValue checks and converts a record as the reference does
// (pds/lexval). write is the index in applyWrites, -1 for the single-record
// methods (it changes the JSON paths in messages).
func prepareRecordValue(write int, collection syntax.NSID, rkey syntax.RecordKey, record lexval.Value, validate *bool) (recordValue, error) {
	rec, err := lexval.PrepareValue(write, collection, rkey, record, validate)
	var le *lexval.Error
	if errors.As(err, &le) {
		return recordValue{}, xrpc.InvalidRequest("", "%s", le.Message)
	}
	if err != nil {
		return recordValue{}, err
	}
	return recordValue{cbor: rec.CBOR, blobs: rec.Blobs, status: string(rec.Status)}, nil
}

// checkedRecord is the record at path in the call's input, as the front
// door parsed it (xrpc.CheckedInput): the record writes' lexicons require
// it, so it is there.
func checkedRecord(r *http.Request, path ...any) lexval.Value {
	v, _ := xrpc.CheckedInput(r).Record(path...)
	return v
}

// recordJSON is a stored record (DAG-CBOR) as the reference prints it.
func recordJSON(cbor []byte) (json.RawMessage, error) { return lexval.RecordJSON(cbor) }

var recordPrefix = cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256)

// recordCID is the CID a record's DAG-CBOR bytes get in the repo.
func recordCID(cbor []byte) (cid.Cid, error) { return recordPrefix.Sum(cbor) }
