package pds

import (
	"encoding/json"
	"errors"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/lexval"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// recordValue is a record ready for the repo: DAG-CBOR, its blob refs and
// its validation status ("" when validation was skipped).
type recordValue struct {
	cbor   []byte
	cid    cid.Cid // of cbor
	blobs  []atdata.Blob
	status string
}

// prepareRecordValue checks and converts a record as the reference does
// (pds/lexval). write is the index in applyWrites, -1 for the single-record
// methods (it changes the JSON paths in messages).
func prepareRecordValue(write int, collection syntax.NSID, rkey syntax.RecordKey, record lexval.Value, validate *bool) (recordValue, error) {
	rec, err := lexval.PrepareValue(write, collection, rkey, record, validate)
	if err == nil {
		return recordValue{cbor: rec.CBOR, cid: rec.CID, blobs: rec.Blobs, status: string(rec.Status)}, nil
	}
	var le *lexval.Error
	if errors.As(err, &le) {
		return recordValue{}, xrpc.InvalidRequest("", "%s", le.Message)
	}
	return recordValue{}, err
}

// inputFields reads the properties of an object of a call's input as the
// lexicon check parsed it, for the input types' ReadInput
// (xrpc.InputReader): each read is what json.Unmarshal makes of a property
// of the lexicon's type (null and absent leave the zero value). A value of
// any other type sets err, and the mux then answers as json.Unmarshal
// would.
type inputFields struct {
	v   lexval.Value
	err error
}

var errInputType = errors.New("input property of an unexpected type")

func newInputFields(v lexval.Value, ok bool) *inputFields {
	f := &inputFields{v: v}
	if !ok || !v.Object() {
		f.err = errInputType
	}
	return f
}

// get is the property key, false when absent or null.
func (f *inputFields) get(key string) (lexval.Value, bool) {
	v, ok := f.v.Record(key)
	return v, ok && !v.Null()
}

func (f *inputFields) str(key string) string {
	v, ok := f.get(key)
	if !ok {
		return ""
	}
	s, ok := v.Str()
	if !ok {
		f.err = errInputType
	}
	return s
}

func (f *inputFields) strPtr(key string) *string {
	if _, ok := f.get(key); !ok {
		return nil
	}
	s := f.str(key)
	return &s
}

func (f *inputFields) boolPtr(key string) *bool {
	v, ok := f.get(key)
	if !ok {
		return nil
	}
	b, ok := v.Bool()
	if !ok {
		f.err = errInputType
		return nil
	}
	return &b
}

// null reports whether the property key is there and null.
func (f *inputFields) null(key string) bool {
	v, ok := f.v.Record(key)
	return ok && v.Null()
}

// recordJSON is a stored record (DAG-CBOR) as the reference prints it.
func recordJSON(cbor []byte) (json.RawMessage, error) { return lexval.RecordJSON(cbor) }

// recordCID is the CID a record's DAG-CBOR bytes get in the repo.
func recordCID(cbor []byte) (cid.Cid, error) { return lexval.RecordCID(cbor), nil }
