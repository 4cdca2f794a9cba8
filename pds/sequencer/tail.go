package sequencer

import "sync"

// tailSize is how many of the newest events the sequencer keeps in memory
// (between tailSize and twice that).
const tailSize = 512

// tail is the newest events in memory, exactly the database's tail: every
// live subscriber reads each new event after its Append, and reading it
// from here spares one SQLite query per subscriber per event. Append adds
// to it after its commit and before it wakes anyone; a deletion of events
// empties it.
type tail struct {
	mu     sync.RWMutex
	events []Stored // consecutive rows of repo_seq, the newest last
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
		t.events = nil
	}
	t.events = append(t.events, evs...)
	if n := len(t.events); n > 2*tailSize {
		t.events = append([]Stored(nil), t.events[n-tailSize:]...)
	}
}

func (t *tail) reset() {
	t.mu.Lock()
	t.events = nil
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
