package sequencer

import "sync"

// The tail keeps between tailSize and twice that many of the newest
// events, and, whatever their count, between tailBytes and twice that
// many bytes of frames (or only the newest event, when that one is
// larger): a run of large records must not keep a thousand of them.
const (
	tailSize  = 512
	tailBytes = 8 << 20
)

// tail is the newest events in memory, exactly the database's tail: every
// live subscriber reads each new event after its Append, and reading it
// from here spares one SQLite query per subscriber per event. Append adds
// to it after its commit and before it wakes anyone; a deletion of events
// empties it.
type tail struct {
	mu     sync.RWMutex
	events []Stored // consecutive rows of repo_seq, the newest last
	bytes  int      // the frames' bytes in events
}

// add appends evs, just committed. Events that do not follow on (a failed
// Append's commit may have taken effect) start the tail over.
func (t *tail) add(evs []Stored) {
	if len(evs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.events); n > 0 && t.events[n-1].Seq+1 != evs[0].Seq {
		t.events, t.bytes = nil, 0
	}
	t.events = append(t.events, evs...)
	for _, e := range evs {
		t.bytes += len(e.Frame)
	}
	if len(t.events) <= 2*tailSize && t.bytes <= 2*tailBytes {
		return
	}
	// Keep the newest events that fit both bounds, at least one, in a
	// new array so that the dropped frames can be freed.
	keep, size := 0, 0
	for i := len(t.events) - 1; i >= 0 && keep < tailSize; i-- {
		n := len(t.events[i].Frame)
		if keep > 0 && size+n > tailBytes {
			break
		}
		size += n
		keep++
	}
	t.events = append([]Stored(nil), t.events[len(t.events)-keep:]...)
	t.bytes = size
}

func (t *tail) reset() {
	t.mu.Lock()
	t.events, t.bytes = nil, 0
	t.mu.Unlock()
}

// after is up to limit events with seq > after, oldest first; ok is false
// when the tail does not hold every such event (after is older than it).
func (t *tail) after(after int64, limit int) (out []Stored, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.events) == 0 || after < t.events[0].Seq-1 {
		return nil, false
	}
	i := int(after - (t.events[0].Seq - 1)) // seqs are consecutive
	if i >= len(t.events) {
		return nil, true
	}
	rest := t.events[i:]
	return append([]Stored(nil), rest[:min(limit, len(rest))]...), true
}

// head is the newest seq, when the tail holds any event.
func (t *tail) head() (int64, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.events) == 0 {
		return 0, false
	}
	return t.events[len(t.events)-1].Seq, true
}
