package repo

import (
	"encoding/binary"

	"github.com/ipfs/go-cid"
)

// commitCAR is the CAR of a commit's blocks under root, as carBytes makes
// it, with the header encoded here: go-car encodes it by reflection
// (refmt), ~20 µs of every write for some 60 bytes. The header is the
// DAG-CBOR map {"roots": [root], "version": 1}, keys in canonical order,
// the root as tag 42 over a zero byte and the CID's bytes.
func commitCAR(root cid.Cid, blocks []block) []byte {
	rb := root.KeyString()
	size := 16 + len(rb)
	for _, b := range blocks {
		size += binary.MaxVarintLen64 + len(b.cid.KeyString()) + len(b.data)
	}
	out := make([]byte, 0, size)
	var hdr [16 + 3]byte // everything but the CID
	h := append(hdr[:0], 0xa2, 0x65, 'r', 'o', 'o', 't', 's', 0x81, 0xd8, 0x2a)
	h = appendCBORBytesHead(h, len(rb)+1)
	h = append(h, 0x00)
	tail := []byte{0x67, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x01}
	out = binary.AppendUvarint(out, uint64(len(h)+len(rb)+len(tail)))
	out = append(out, h...)
	out = append(out, rb...)
	out = append(out, tail...)
	for _, b := range blocks {
		cb := b.cid.KeyString()
		out = binary.AppendUvarint(out, uint64(len(cb)+len(b.data)))
		out = append(out, cb...)
		out = append(out, b.data...)
	}
	return out
}

// appendCBORBytesHead appends the head of a CBOR byte string of n bytes.
func appendCBORBytesHead(b []byte, n int) []byte {
	switch {
	case n < 24:
		return append(b, 0x40|byte(n))
	case n < 1<<8:
		return append(b, 0x58, byte(n))
	default:
		return append(b, 0x59, byte(n>>8), byte(n))
	}
}
