package lexval

import (
	"errors"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/ipfs/go-cid"
)

// typedBlob reads a blob object ({"$type": "blob", "ref", "mimeType",
// "size"} and nothing else) as lex-data's isTypedBlobRef does. Validation
// is strict: the ref must be a raw-codec CID and the size known. Blob
// enumeration is not: any CID, and a size of -1, will do.
func typedBlob(val any, strict bool) (atdata.Blob, bool) {
	o, ok := val.(*object)
	if !ok || len(o.fields) > 4 {
		return atdata.Blob{}, false
	}
	var b atdata.Blob
	var typ, ref, mime, size bool
	for _, f := range o.fields {
		switch v := f.val; f.key {
		case "$type":
			typ = v == "blob"
		case "ref":
			c, isCID := v.(cid.Cid)
			ref = isCID && (!strict || c.Version() == 1 && c.Type() == cid.Raw)
			b.Ref = atdata.CIDLink(c)
		case "mimeType":
			s, _ := v.(string)
			mime = containsSlash(s)
			b.MimeType = s
		case "size":
			n, isInt := v.(int64)
			size = isInt && (n >= 0 || !strict && n == -1)
			b.Size = n
		default:
			return atdata.Blob{}, false
		}
	}
	return b, typ && ref && mime && size
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

// legacyBlob reads a legacy blob object ({"cid": string, "mimeType":
// string} and nothing else) as lex-data's isLegacyBlobRef does; strict
// wants a raw-codec CID.
func legacyBlob(val any, strict bool) (atdata.Blob, bool) {
	o, ok := val.(*object)
	if !ok || len(o.fields) != 2 {
		return atdata.Blob{}, false
	}
	c0, m0 := o.fields[0], o.fields[1]
	if c0.key != "cid" {
		c0, m0 = m0, c0
	}
	if c0.key != "cid" || m0.key != "mimeType" {
		return atdata.Blob{}, false
	}
	s, _ := c0.val.(string)
	m, _ := m0.val.(string)
	if m == "" || !validCIDString(s) {
		return atdata.Blob{}, false
	}
	c, _ := cid.Decode(s)
	if strict && (c.Version() != 1 || c.Type() != cid.Raw) {
		return atdata.Blob{}, false
	}
	return atdata.Blob{Ref: atdata.CIDLink(c), MimeType: m, Size: -1}, true
}

// errLegacyBlob: the reference lets a legacy blob with a CID other than a
// raw one through its prepare step and then fails on it (500).
var errLegacyBlob = errors.New("lexval: legacy blob with a non-raw CID")

// blobs lists the blobs a record holds in the order lex-data's
// enumBlobRefs yields them (depth first, last child first). A legacy blob
// with a raw CID is refused, as the reference does since it stopped taking
// new ones; one with another CID is reported by legacy, for the caller to
// fail on after what the reference checks before it.
func blobs(record *object) (refs []atdata.Blob, legacy bool, err error) {
	stack := make([]any, 1, 32)
	stack[0] = record
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch v := v.(type) {
		case []any:
			stack = append(stack, v...)
		case *object:
			if b, ok := typedBlob(v, false); ok {
				refs = append(refs, b)
				continue
			}
			if b, ok := legacyBlob(v, false); ok {
				if _, raw := legacyBlob(v, true); raw {
					return nil, false, &Error{Message: "Legacy blobs are not allowed (" + b.Ref.String() + ")"}
				}
				legacy = true
				continue
			}
			for _, f := range v.fields {
				if f.val != nil {
					stack = append(stack, f.val)
				}
			}
		}
	}
	return refs, legacy, nil
}
