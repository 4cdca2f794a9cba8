package lexval

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/jsvalue"
)

// encodeCBOR appends v as DAG-CBOR: map keys sorted length first, shortest
// integer forms, CIDs as tag 42. It writes what the reference's lex-cbor
// writes for the same data, so records get the same CIDs; atdata's encoder
// gives the same bytes (the tests hold it to that) but wants a
// map[string]any tree, which would cost a copy of every record.
func encodeCBOR(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, 0xf6), nil
	case bool:
		if v {
			return append(b, 0xf5), nil
		}
		return append(b, 0xf4), nil
	case int64:
		if v < 0 {
			return appendHead(b, 1, uint64(-(v + 1))), nil
		}
		return appendHead(b, 0, uint64(v)), nil
	case float64:
		return nil, nonInteger(v)
	case string:
		b = appendHead(b, 3, uint64(len(v)))
		return append(b, v...), nil
	case []byte:
		b = appendHead(b, 2, uint64(len(v)))
		return append(b, v...), nil
	case cid.Cid:
		raw := v.Bytes()
		b = append(b, 0xd8, 42)
		b = appendHead(b, 2, uint64(len(raw)+1))
		b = append(b, 0)
		return append(b, raw...), nil
	case []any:
		b = appendHead(b, 4, uint64(len(v)))
		var err error
		for _, x := range v {
			if b, err = encodeCBOR(b, x); err != nil {
				return nil, err
			}
		}
		return b, nil
	case *object:
		b = appendHead(b, 5, uint64(len(v.fields)))
		// Sorted in place: encoding is the last use of a record's data.
		slices.SortFunc(v.fields, cborKeyOrder)
		var err error
		for _, f := range v.fields {
			b = appendHead(b, 3, uint64(len(f.key)))
			b = append(b, f.key...)
			if b, err = encodeCBOR(b, f.val); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("lexval: cannot encode %T", v)
}

// cborKeyOrder is DAG-CBOR's map key order: shorter first, then bytewise.
func cborKeyOrder(a, b field) int {
	if len(a.key) != len(b.key) {
		return len(a.key) - len(b.key)
	}
	return strings.Compare(a.key, b.key)
}

// nonInteger is lex-cbor's refusal of a number that is not a safe
// integer; the reference answers 500 with its message.
type nonInteger float64

func (n nonInteger) Error() string {
	return "Non-integer numbers (" + jsvalue.Number(float64(n)) + ") are not supported by the AT Data Model"
}

func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= math.MaxUint8:
		return append(b, m|24, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

var errCBOR = errors.New("lexval: malformed DAG-CBOR record")

// cborReader transcodes DAG-CBOR to JSON (see RecordJSON).
type cborReader struct {
	data []byte
	pos  int
}

// maxCBORDepth bounds nesting of stored records being printed.
const maxCBORDepth = 10000

func (r *cborReader) head() (major byte, arg uint64, err error) {
	if r.pos >= len(r.data) {
		return 0, 0, errCBOR
	}
	c := r.data[r.pos]
	r.pos++
	major, info := c>>5, c&0x1f
	switch {
	case info < 24:
		return major, uint64(info), nil
	case info <= 27:
		n := 1 << (info - 24)
		if len(r.data)-r.pos < n {
			return 0, 0, errCBOR
		}
		for _, x := range r.data[r.pos : r.pos+n] {
			arg = arg<<8 | uint64(x)
		}
		r.pos += n
		return major, arg, nil
	}
	return 0, 0, errCBOR // indefinite lengths are not DAG-CBOR
}

func (r *cborReader) take(n uint64) ([]byte, error) {
	if n > uint64(len(r.data)-r.pos) {
		return nil, errCBOR
	}
	b := r.data[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

// json appends the next value as the reference prints a stored record:
// map keys in the order JavaScript enumerates the decoded object, CIDs as
// {"$link": ...}, bytes as {"$bytes": ...} (unpadded base64), strings
// escaped as JSON.stringify does.
func (r *cborReader) json(out []byte, depth int) ([]byte, error) {
	if depth > maxCBORDepth {
		return nil, errCBOR
	}
	start := r.pos
	major, arg, err := r.head()
	if err != nil {
		return nil, err
	}
	switch major {
	case 0:
		return strconv.AppendUint(out, arg, 10), nil
	case 1:
		if arg >= math.MaxInt64 {
			return append(append(out, '-'), strconv.FormatUint(arg+1, 10)...), nil
		}
		return strconv.AppendInt(out, -1-int64(arg), 10), nil
	case 2:
		b, err := r.take(arg)
		if err != nil {
			return nil, err
		}
		out = append(out, `{"$bytes":"`...)
		out = base64.RawStdEncoding.AppendEncode(out, b)
		return append(out, `"}`...), nil
	case 3:
		s, err := r.take(arg)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(s) {
			s = []byte(string([]rune(string(s))))
		}
		return jsvalue.AppendQuote(out, string(s)), nil
	case 4:
		out = append(out, '[')
		for i := uint64(0); i < arg; i++ {
			if i > 0 {
				out = append(out, ',')
			}
			if out, err = r.json(out, depth+1); err != nil {
				return nil, err
			}
		}
		return append(out, ']'), nil
	case 5:
		mapStart := len(out)
		out = append(out, '{')
		var buf [16]entry
		entries := buf[:0]
		for i := uint64(0); i < arg; i++ {
			if i > 0 {
				out = append(out, ',')
			}
			km, kn, err := r.head()
			if err != nil || km != 3 {
				return nil, errCBOR
			}
			k, err := r.take(kn)
			if err != nil {
				return nil, err
			}
			e := entry{start: len(out), index: jsvalue.IsArrayIndex(string(k))}
			if e.index {
				e.n, _ = strconv.ParseUint(string(k), 10, 64)
			}
			out = jsvalue.AppendQuote(out, string(k))
			out = append(out, ':')
			if out, err = r.json(out, depth+1); err != nil {
				return nil, err
			}
			e.end = len(out)
			entries = append(entries, e)
		}
		out = append(out, '}')
		return reorderIndexKeys(out, mapStart, entries), nil
	case 6:
		if arg != 42 {
			return nil, errCBOR
		}
		bm, bn, err := r.head()
		if err != nil || bm != 2 {
			return nil, errCBOR
		}
		b, err := r.take(bn)
		if err != nil || len(b) < 2 || b[0] != 0 {
			return nil, errCBOR
		}
		c, err := cid.Cast(b[1:])
		if err != nil {
			return nil, errCBOR
		}
		out = append(out, `{"$link":"`...)
		out = append(out, c.String()...)
		return append(out, `"}`...), nil
	case 7:
		switch r.data[start] {
		case 0xf4:
			return append(out, "false"...), nil
		case 0xf5:
			return append(out, "true"...), nil
		case 0xf6, 0xf7:
			return append(out, "null"...), nil
		case 0xf9:
			return appendFloat(out, float64(halfToFloat(uint16(arg))))
		case 0xfa:
			return appendFloat(out, float64(math.Float32frombits(uint32(arg))))
		case 0xfb:
			return appendFloat(out, math.Float64frombits(arg))
		}
	}
	return nil, errCBOR
}

// entry is one key/value of a map printed in out[start:end].
type entry struct {
	start, end int
	index      bool // the key is an array index
	n          uint64
}

// reorderIndexKeys puts the entries of the map printed at out[mapStart:]
// in the order JavaScript enumerates the object the reference decodes:
// array-index keys first, ascending, then the others as stored.
func reorderIndexKeys(out []byte, mapStart int, entries []entry) []byte {
	if !slices.ContainsFunc(entries, func(e entry) bool { return e.index }) {
		return out
	}
	sorted := slices.Clone(entries)
	slices.SortStableFunc(sorted, func(a, b entry) int {
		switch {
		case a.index && b.index:
			return cmp.Compare(a.n, b.n)
		case a.index:
			return -1
		case b.index:
			return 1
		}
		return 0
	})
	printed := slices.Clone(out[mapStart:])
	out = append(out[:mapStart], '{')
	for i, e := range sorted {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, printed[e.start-mapStart:e.end-mapStart]...)
	}
	return append(out, '}')
}

// appendFloat prints a float that some other implementation stored; the
// reference's decoder refuses NaN and infinities.
func appendFloat(out []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errCBOR
	}
	return append(out, jsvalue.Number(f)...), nil
}

func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h & 0x3ff)
	switch exp {
	case 0:
		f := float32(frac) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	case 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}
