package pds

import (
	"encoding/json"
	"fmt"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/fakepds/fakepds/pds/xrpc"
)

// recordValue is a record ready for the repo: DAG-CBOR, its blob refs and
// its validation status.
type recordValue struct {
	cbor   []byte
	blobs  []atdata.Blob
	status string
}

// prepareRecordValue converts a record from JSON to DAG-CBOR through
// indigo's atdata (which checks the atproto data model) and checks its
// $type against the collection.
func prepareRecordValue(collection syntax.NSID, rkey syntax.RecordKey, record json.RawMessage, validate *bool) (recordValue, error) {
	obj, err := atdata.UnmarshalJSON(record)
	if err != nil {
		return recordValue{}, xrpc.InvalidRequest("", "Invalid record: %v", err)
	}
	typ, _ := obj["$type"].(string)
	if typ != collection.String() {
		return recordValue{}, xrpc.InvalidRequest("", "Invalid $type: expected %s, got %s", collection, typ)
	}
	b, err := atdata.MarshalCBOR(obj)
	if err != nil {
		return recordValue{}, xrpc.InvalidRequest("", "Invalid record: %v", err)
	}
	return recordValue{cbor: b, blobs: atdata.ExtractBlobs(obj), status: "unknown"}, nil
}

// recordJSON is a stored record (DAG-CBOR) as JSON, links as {"$link"},
// bytes as {"$bytes"}, blobs as blob objects.
func recordJSON(cbor []byte) (json.RawMessage, error) {
	obj, err := atdata.UnmarshalCBOR(cbor)
	if err != nil {
		return nil, fmt.Errorf("decode stored record: %w", err)
	}
	return json.Marshal(obj)
}

var recordPrefix = cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256)

// recordCID is the CID a record's DAG-CBOR bytes get in the repo.
func recordCID(cbor []byte) (cid.Cid, error) { return recordPrefix.Sum(cbor) }
