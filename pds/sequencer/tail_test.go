package sequencer

import "testing"

// The tail is bounded by bytes as well as by count: 1 MiB records keep
// about tailBytes of them, not 2*tailSize, and a record larger than the
// bound still leaves the newest event in memory.
func TestTailBoundedByBytes(t *testing.T) {
	var tl tail
	const mib = 1 << 20
	seq := int64(0)
	push := func(size int) {
		seq++
		tl.add([]Stored{{Seq: seq, Frame: make([]byte, size)}})
		sum := 0
		for _, e := range tl.events {
			sum += len(e.Frame)
		}
		if sum != tl.bytes {
			t.Fatalf("after seq %d: bytes %d, frames hold %d", seq, tl.bytes, sum)
		}
		if tl.bytes > 2*tailBytes && len(tl.events) > 1 {
			t.Fatalf("after seq %d: %d events of %d bytes kept, over twice %d", seq, len(tl.events), tl.bytes, tailBytes)
		}
		if h, ok := tl.head(); !ok || h != seq {
			t.Fatalf("after seq %d: head %d, %v", seq, h, ok)
		}
	}
	for range 200 {
		push(mib)
	}
	if len(tl.events) > 2*tailBytes/mib {
		t.Fatalf("%d events of 1 MiB kept", len(tl.events))
	}
	if evs, ok := tl.after(seq-1, 10); !ok || len(evs) != 1 || evs[0].Seq != seq {
		t.Fatalf("after(head-1) = %d events, %v", len(evs), ok)
	}
	if _, ok := tl.after(0, 10); ok {
		t.Fatal("after(0) answered from a tail that dropped the oldest events")
	}
	push(3 * tailBytes)
	if evs, ok := tl.after(seq-1, 10); !ok || len(evs) != 1 || len(evs[0].Frame) != 3*tailBytes {
		t.Fatalf("after a large event: %d events, %v", len(evs), ok)
	}
	for range 3000 {
		push(10)
	}
	if len(tl.events) > 2*tailSize {
		t.Fatalf("%d small events kept, over twice %d", len(tl.events), tailSize)
	}
}
