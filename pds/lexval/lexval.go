package lexval

import (
	"crypto/sha256"
	"encoding/json"
	"math"
	"slices"
	"sync"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/fakepds/fakepds/pds/jsvalue"
)

// Status is a write's validationStatus.
type Status string

const (
	// StatusNone: validation was skipped (validate=false); the reference
	// then leaves validationStatus out of its output.
	StatusNone Status = ""
	// StatusValid: the record matched its lexicon.
	StatusValid Status = "valid"
	// StatusUnknown: no lexicon is known for the collection, and
	// validation was not required.
	StatusUnknown Status = "unknown"
)

// Record is a record checked and converted for a repo write.
type Record struct {
	CBOR   []byte        // DAG-CBOR, as the repo stores it
	CID    cid.Cid       // the CID of CBOR (dag-cbor, sha2-256)
	Blobs  []atdata.Blob // blobs the record references, duplicates kept
	Status Status
}

// Error is a record the reference refuses with 400 InvalidRequest; Message
// is the reference's message.
type Error struct {
	Message string
	// Body is set when the reference refuses the record while it checks
	// the request body against the method's input schema: after it
	// authenticates the request, before the handler runs (and so before
	// the handler's account checks). The other errors come from the
	// handler's prepare step.
	Body bool
}

func (e *Error) Error() string { return e.Message }

// Prepare checks and converts the record of a createRecord or putRecord
// call, given as the JSON of the request's "record" field, for the write
// of collection/rkey. validate is the request's "validate": nil when
// unset. The caller generates the rkey of a createRecord without one (a
// TID), as the reference does before it checks the key.
//
// Errors of type *Error carry the reference's message; anything else is an
// internal error (the reference answers 500).
func Prepare(collection syntax.NSID, rkey syntax.RecordKey, record []byte, validate *bool) (*Record, error) {
	return prepare(collection, rkey, record, validate, -1)
}

// PrepareWrite is Prepare for writes[i] of an applyWrites call (a create or
// an update), whose messages name that write.
func PrepareWrite(i int, collection syntax.NSID, rkey syntax.RecordKey, record []byte, validate *bool) (*Record, error) {
	return prepare(collection, rkey, record, validate, i)
}

// PrepareValue is Prepare of a record CheckInput has parsed already
// (Input.Record), which saves parsing it again; write is its index in an
// applyWrites call, -1 for createRecord and putRecord.
// It answers the Record itself, not a pointer to one it allocated.
func PrepareValue(write int, collection syntax.NSID, rkey syntax.RecordKey, record Value, validate *bool) (Record, error) {
	return prepareValue(collection, rkey, record.v, validate, write)
}

// RecordCID is the CID of a record's DAG-CBOR bytes in a repo: CIDv1,
// dag-cbor, sha2-256, as cid.NewPrefixV1(cid.DagCBOR,
// multihash.SHA2_256).Sum makes it, without that hasher's allocations.
func RecordCID(cbor []byte) cid.Cid {
	var b [4 + sha256.Size]byte
	b[0], b[1], b[2], b[3] = 1, cid.DagCBOR, multihash.SHA2_256, sha256.Size
	h := sha256.Sum256(cbor)
	copy(b[4:], h[:])
	c, err := cid.Cast(b[:])
	if err != nil {
		panic("lexval: a record CID does not parse: " + err.Error())
	}
	return c
}

func prepare(collection syntax.NSID, rkey syntax.RecordKey, data []byte, validate *bool, write int) (*Record, error) {
	v, err := parseJSON(data)
	if err != nil {
		if e, ok := err.(*Error); ok {
			return nil, e
		}
		return nil, &Error{Message: "Invalid JSON in record", Body: true}
	}
	rec, err := prepareValue(collection, rkey, v, validate, write)
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// prepareValue is prepare once the record is parsed.
func prepareValue(collection syntax.NSID, rkey syntax.RecordKey, v any, validate *bool, write int) (Record, error) {
	// Where the reference's messages place the record: its input schema
	// calls it $.record or $.writes[i].value, its record validation
	// $.record or $.writes[i].record.
	bodyPath := []seg{{key: "record", idx: -1}}
	path := bodyPath
	if write >= 0 {
		bodyPath = []seg{{key: "writes", idx: -1}, {idx: write}, {key: "value", idx: -1}}
		path = []seg{{key: "writes", idx: -1}, {idx: write}, {key: "record", idx: -1}}
	}

	rec, ok := v.(*object)
	if !ok {
		is := issue{path: bodyPath, msg: msgInvalidType(v, "object")}
		return Record{}, &Error{Message: is.String(), Body: true}
	}
	stack := segStacks.Get().(*[]seg)
	defer putSegs(stack)
	body := bodyCheck{path: append((*stack)[:0], bodyPath...)}
	is := body.values(rec)
	*stack = body.path
	if is != nil {
		return Record{}, &Error{Message: is.String(), Body: true}
	}

	if t, ok := rec.get("$type"); !ok {
		rec.fields = append(rec.fields, field{"$type", collection.String()})
	} else if t != collection.String() {
		return Record{}, &Error{Message: "Invalid $type: expected " + collection.String() + ", got " + jsvalue.String(t)}
	}
	if !validRecordKey(rkey.String()) {
		return Record{}, &Error{Message: "Invalid record key: " + rkey.String()}
	}

	status := StatusNone
	if validate == nil || *validate {
		schema, err := defaultCatalog().record(collection.String())
		if err != nil {
			return Record{}, err
		}
		switch {
		case schema != nil:
			var kv validator
			if is := kv.validate(schema.key, rkey.String()); is != nil {
				return Record{}, &Error{Message: "Invalid record key for " + collection.String() + ": " + is.String()}
			}
			rv := validator{path: append((*stack)[:0], path...)}
			is := rv.validate(schema, rec)
			*stack = rv.path
			if is != nil {
				return Record{}, &Error{Message: "Invalid " + collection.String() + " record: " + is.String()}
			}
			status = StatusValid
		case validate != nil:
			return Record{}, &Error{Message: "Unknown lexicon type: " + collection.String()}
		default:
			status = StatusUnknown
		}
	}

	refs, legacy, err := blobs(rec)
	if err != nil {
		return Record{}, err
	}
	if body.unsafe != nil {
		return Record{}, body.unsafe
	}
	if legacy {
		return Record{}, errLegacyBlob
	}
	b, err := encodeScratch(rec)
	if err != nil {
		return Record{}, err
	}
	return Record{CBOR: b, CID: RecordCID(b), Blobs: refs, Status: status}, nil
}

// cborScratch holds the buffers records are encoded into before their
// bytes are copied out at their size. Each record's buffer had been made
// as large as the JSON body it came in, and in an applyWrites each of its
// records came in the whole body: 200 creates allocated 26.7 MB
// (BenchmarkPrepareApplyWrites).
var cborScratch = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// encodeScratch is v's DAG-CBOR in a slice of its own, exactly its size.
func encodeScratch(v any) ([]byte, error) {
	sp := cborScratch.Get().(*[]byte)
	b, err := encodeCBOR((*sp)[:0], v)
	var out []byte
	if err == nil {
		out = append(make([]byte, 0, len(b)), b...)
	}
	if cap(b) <= 64<<10 { // a rare large record's buffer is not kept
		*sp = b[:0]
		cborScratch.Put(sp)
	}
	return out, err
}

// segStacks are the checks' path stacks, kept between calls: an issue
// copies the path it keeps (validator.fail, bodyCheck.value).
var segStacks = sync.Pool{New: func() any { s := make([]seg, 0, 16); return &s }}

// putSegs returns a stack to segStacks, its keys let go.
func putSegs(p *[]seg) {
	if s := *p; cap(s) <= 1024 {
		clear(s[:cap(s)])
		*p = s[:0]
		segStacks.Put(p)
	}
}

// bodyCheck is the input schema's check of a record (lex-schema's lexMap):
// every value must be in the data model, so no fractional numbers. It
// walks the record in JavaScript order, which is also the order in which
// the reference's CBOR encoder meets numbers: the first integral number
// beyond 2^53 it meets is the one its encoding error names.
type bodyCheck struct {
	path   []seg // a stack, extended in place
	unsafe error // the encoding error to come, if any
}

func (c *bodyCheck) values(o *object) *issue {
	for _, f := range o.fields {
		c.path = append(c.path, seg{key: f.key, idx: -1})
		is := c.value(f.val)
		c.path = c.path[:len(c.path)-1]
		if is != nil {
			return is
		}
	}
	return nil
}

func (c *bodyCheck) value(v any) *issue {
	switch v := v.(type) {
	case float64:
		// Number.isInteger: integral floats beyond 2^53 pass here, and fail
		// later as integers (or when encoded).
		if math.IsInf(v, 0) || math.Trunc(v) != v {
			return &issue{
				path: slices.Clone(c.path),
				msg:  msgInvalidType(v, "null", "boolean", "integer", "string", "cid", "bytes", "array", "object"),
			}
		}
		if c.unsafe == nil {
			c.unsafe = nonInteger(v)
		}
	case []any:
		for i, x := range v {
			c.path = append(c.path, seg{idx: i})
			is := c.value(x)
			c.path = c.path[:len(c.path)-1]
			if is != nil {
				return is
			}
		}
	case *object:
		return c.values(v)
	}
	return nil
}

// RecordJSON is a stored record (DAG-CBOR) as JSON, as the reference's
// getRecord and listRecords print its value: keys in stored order (DAG-CBOR
// order: shorter first) except that array-index keys ("0", "12") come
// first, as in any JavaScript object; CID links as {"$link": ...}, bytes
// as {"$bytes": ...} (base64, unpadded), a blob as the object it is stored
// as: {"ref":{"$link":...},"size":...,"$type":"blob","mimeType":...}.
//
// Marshal it with HTML escaping off (json.Encoder.SetEscapeHTML(false)) to
// keep '<', '>' and '&' as the reference prints them.
func RecordJSON(cbor []byte) (json.RawMessage, error) {
	return AppendRecordJSON(make([]byte, 0, len(cbor)+len(cbor)/2), cbor)
}

// AppendRecordJSON appends RecordJSON(cbor) to dst (listRecords writes
// every record of a page into one buffer).
func AppendRecordJSON(dst, cbor []byte) ([]byte, error) {
	r := cborReader{data: cbor}
	out, err := r.json(dst, 0)
	if err != nil {
		return nil, err
	}
	if r.pos != len(cbor) {
		return nil, errCBOR
	}
	return out, nil
}
