package sequencer

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atdata"
	cbg "github.com/whyrusleeping/cbor-gen"
)

// Event types as stored (the reference's names; "append" is a #commit).
const (
	TypeCommit   = "append"
	TypeSync     = "sync"
	TypeIdentity = "identity"
	TypeAccount  = "account"
)

// frameType is the "t" of a stored event's frame header.
var frameType = map[string]string{
	TypeCommit:   "#commit",
	TypeSync:     "#sync",
	TypeIdentity: "#identity",
	TypeAccount:  "#account",
}

// headers are the CBOR frame headers ({op: 1, t: ...}), encoded once.
var headers = func() map[string][]byte {
	m := map[string][]byte{}
	for typ, t := range frameType {
		b, err := atdata.MarshalCBOR(map[string]any{"op": int64(1), "t": t})
		if err != nil {
			panic(err)
		}
		m[typ] = b
	}
	return m
}()

// Event is one firehose message to sequence: Body is one of the indigo
// types *SyncSubscribeRepos_Commit, _Sync, _Identity or _Account, with Seq
// and Time left for Append to fill.
type Event struct {
	DID  string
	Body cbg.CBORMarshaler
}

// Identity, Account, Commit and Sync build Events.
func Identity(did string, handle string) Event {
	e := &comatproto.SyncSubscribeRepos_Identity{Did: did}
	if handle != "" {
		e.Handle = &handle
	}
	return Event{DID: did, Body: e}
}

// Account is an #account event; status is "" when the account is active.
func Account(did string, status string) Event {
	e := &comatproto.SyncSubscribeRepos_Account{Did: did, Active: status == ""}
	if status != "" {
		e.Status = &status
	}
	return Event{DID: did, Body: e}
}

// Commit wraps a #commit body (Repo set by the caller).
func Commit(c *comatproto.SyncSubscribeRepos_Commit) Event { return Event{DID: c.Repo, Body: c} }

// Sync wraps a #sync body.
func Sync(s *comatproto.SyncSubscribeRepos_Sync) Event { return Event{DID: s.Did, Body: s} }

// stamp sets the seq and time of e's body and returns its stored type.
func stamp(e Event, seq int64, t string) (string, error) {
	switch b := e.Body.(type) {
	case *comatproto.SyncSubscribeRepos_Commit:
		b.Seq, b.Time = seq, t
		return TypeCommit, nil
	case *comatproto.SyncSubscribeRepos_Sync:
		b.Seq, b.Time = seq, t
		return TypeSync, nil
	case *comatproto.SyncSubscribeRepos_Identity:
		b.Seq, b.Time = seq, t
		return TypeIdentity, nil
	case *comatproto.SyncSubscribeRepos_Account:
		b.Seq, b.Time = seq, t
		return TypeAccount, nil
	}
	return "", fmt.Errorf("sequencer: unknown event body %T", e.Body)
}

// Stored is a sequenced event: Frame is the whole WebSocket message
// (header and body), ready to send.
type Stored struct {
	Seq   int64
	DID   string
	Type  string
	Time  time.Time
	Frame []byte
}

const timeFormat = "2006-01-02T15:04:05.000Z"

// Append sequences events in one transaction, in order, and wakes the
// subscribers once it has committed. The frames are stored whole, seq and
// time included, so the firehose sends bytes without re-encoding them.
//
// Times never go backwards in seq order: callers read the clock before
// they wait for the lock, and a test's clock may be moved back, so an
// event stamped now earlier than the newest stored one gets that one's
// time instead. LastBefore relies on it.
//
// Appends that queue while another commits go in one transaction
// together (a group commit), each call's events contiguous and in the
// order the calls queued; each call returns once that transaction has
// committed, and fails if it failed. Every write of every account
// appends here, so with one commit per call concurrent writers queued
// behind each other's commits: with 16 writers on 2 cores, the wait for
// this lock was most of a write's time (BenchmarkConcurrentWriters,
// -blockprofile).
func (s *Sequencer) Append(ctx context.Context, now time.Time, events ...Event) ([]Stored, error) {
	r := s.enqueue(ctx, now, false, events)
	if r.done {
		return r.out, r.err
	}
	<-r.wake // the batch's end
	return r.out, r.err
}

// Pending is events written but not committed: what a repo write holds
// while its own transaction commits, so that an event that cannot be
// stored fails the write instead of leaving the repo ahead of the log (the
// reference sequences a commit inside its actor store transaction), while
// no event is visible before the data it names. Its batch (see Append)
// commits once every Pending in it has reported; repo writes that queue
// together commit their own stores at once, and share one commit of the
// log.
type Pending struct {
	s *Sequencer
	r *appendCall
}

// Prepare writes events as Append does, without committing them; the
// caller ends it with Commit or Abort, once, soon: its batch waits for it.
// A Prepare that fails leaves nothing behind and does not count as a
// failed Append (see Failed): the caller fails what the events describe.
func (s *Sequencer) Prepare(ctx context.Context, now time.Time, events ...Event) (*Pending, error) {
	r := s.enqueue(ctx, now, true, events)
	if r.done {
		return nil, r.err
	}
	return &Pending{s: s, r: r}, nil
}

// Commit reports that what the events describe is stored, and returns
// once the batch has committed (then the events are in the tail and the
// subscribers woken). Its failure is an Append's: what the events describe
// is stored, they are not (see Failed).
func (p *Pending) Commit() ([]Stored, error) { return p.end(true) }

// Abort reports that what the events describe was not stored: the batch
// is rolled back, and every other call in it fails (a rare case: the
// caller's own commit failed after its statements had all succeeded).
func (p *Pending) Abort() { _, _ = p.end(false) }

func (p *Pending) end(ok bool) ([]Stored, error) {
	r := p.r
	r.report <- ok
	if r.leads {
		p.s.finish(r.batch)
	}
	<-r.wake
	return r.out, r.err
}

// appendCall is one Append or Prepare waiting for its batch. Its caller
// reads out, err and done once woken.
type appendCall struct {
	now    time.Time
	events []Event
	out    []Stored
	err    error
	done   bool          // failed, or (Append) committed
	wake   chan struct{} // this call leads the next batch; written; done
	held   bool          // a Prepare: the batch commits on its report
	report chan bool     // held: written to by Commit (true) or Abort
	leads  bool          // held: this call's Commit or Abort ends its batch
	early  bool          // failed while its batch was written
	batch  *batch        // held and leads: the batch it ends
}

// batch is the calls one transaction writes, between writing them and
// ending it.
type batch struct {
	calls []*appendCall
	end   func(commit bool) error
	err   error // the writes failed: nothing to commit
}

// enqueue queues a call; it returns once the call failed (done), was
// written (a held call), or, for an Append, when its batch is left to
// end (not done: the caller waits on wake).
func (s *Sequencer) enqueue(ctx context.Context, now time.Time, held bool, events []Event) *appendCall {
	// Once a commit is in its actor store, its event must follow: a caller
	// giving up must not leave the firehose with a gap.
	ctx = context.WithoutCancel(ctx)
	r := &appendCall{now: now.UTC().Truncate(time.Millisecond), events: events, held: held, wake: make(chan struct{}, 1)} // as stored, so memory and database agree
	if held {
		r.report = make(chan bool, 1)
	}
	s.qmu.Lock()
	s.queue = append(s.queue, r)
	lead := !s.leading
	s.leading = true
	s.qmu.Unlock()
	if !lead {
		// A batch is running: the next takes r, or r leads it.
		if <-r.wake; r.done || r.out != nil {
			return r // failed, or written in a batch another leads
		}
	}
	s.qmu.Lock()
	calls := s.queue
	s.queue = nil
	s.qmu.Unlock()
	s.mu.Lock()
	b := s.write(ctx, calls, r)
	if r.done {
		// r failed to encode, or the writes failed; the batch still
		// needs its end.
		go s.finish(b)
		return r
	}
	if held {
		r.leads, r.batch = true, b
		return r
	}
	s.finish(b)
	return r
}

// write writes calls in one transaction, holding s.mu, and lets the held
// ones but the leader know. A call that failed here (its events do not encode, or the
// writes failed) is early. The transaction is left open for finish.
func (s *Sequencer) write(ctx context.Context, calls []*appendCall, leader *appendCall) *batch {
	b := &batch{calls: calls}
	tx, end, err := s.db.Begin(ctx)
	if err == nil {
		b.end = end
		insert := tx.StmtContext(ctx, s.insertStmt)
		seq, lastTime := s.last, s.lastTime
		for _, r := range calls {
			now := r.now
			if now.Before(lastTime) {
				now = lastTime
			}
			// A call whose events do not encode fails alone, before any
			// of them is written.
			if r.out, r.err = s.encode(r.events, seq, now); r.err != nil {
				r.out, r.done, r.early = nil, true, true
				continue
			}
			for _, st := range r.out {
				if _, err = insert.ExecContext(ctx, st.Seq, st.DID, st.Type, st.Frame, st.Time.Format(timeFormat)); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
			lastTime = now
			seq += int64(len(r.out))
		}
	}
	if err != nil {
		b.err = err
		for _, r := range calls {
			r.out, r.err, r.done, r.early = nil, err, true, true
		}
	}
	for _, r := range calls {
		if r.held && r != leader {
			r.wake <- struct{}{} // written, or failed
		}
	}
	return b
}

// finish ends b once every held call written in it reported: it commits
// when each stored what its events describe, else rolls back. Then it
// wakes the calls still waiting, releases s.mu and hands the lead on.
func (s *Sequencer) finish(b *batch) {
	err := b.err
	switch {
	case err != nil:
		if b.end != nil {
			_ = b.end(false)
		}
	default:
		commit := true
		for _, r := range b.calls {
			if r.held && !r.early && !<-r.report {
				commit = false
			}
		}
		if !commit {
			_ = b.end(false)
			err = errors.New("sequencer: another write of the batch was rolled back")
		} else if err = b.end(true); err != nil {
			// A failed commit may still have taken effect: read the last
			// seq again rather than trust the count.
			if last, rerr := s.readLast(context.Background()); rerr == nil {
				s.last = last
			}
		}
	}
	var all []Stored
	for _, r := range b.calls {
		if r.early {
			if !r.held && b.err != nil {
				s.failed = true // what its events describe is stored
			}
			continue
		}
		if err != nil {
			r.out, r.err = nil, err
			if !r.held {
				s.failed = true
			}
		}
		all = append(all, r.out...)
	}
	if err == nil && len(all) > 0 {
		s.last, s.lastTime = all[len(all)-1].Seq, all[len(all)-1].Time
		s.tail.add(all)
		s.wake()
	}
	for _, r := range b.calls {
		switch {
		case !r.early:
			r.done = true
			r.wake <- struct{}{} // buffered: a leader's own is never read
		case !r.held:
			r.wake <- struct{}{} // a held early call was woken by write
		}
	}
	s.mu.Unlock()
	// Hand the lead to the first call that queued meanwhile, if any.
	s.qmu.Lock()
	var next *appendCall
	if len(s.queue) > 0 {
		next = s.queue[0]
	} else {
		s.leading = false
	}
	s.qmu.Unlock()
	if next != nil {
		next.wake <- struct{}{}
	}
}

// encode stamps events with the seqs after last and time now and encodes
// their frames.
func (s *Sequencer) encode(events []Event, last int64, now time.Time) ([]Stored, error) {
	t := now.Format(timeFormat)
	out := make([]Stored, 0, len(events))
	for i, e := range events {
		// The last one given out plus one (readLast, then memory).
		seq := last + int64(i) + 1
		typ, err := stamp(e, seq, t)
		if err != nil {
			return nil, err
		}
		s.buf.Reset()
		s.buf.Write(headers[typ])
		if err := e.Body.MarshalCBOR(&s.buf); err != nil {
			return nil, fmt.Errorf("sequencer: encode %s: %w", typ, err)
		}
		out = append(out, Stored{Seq: seq, DID: e.DID, Type: typ, Time: now, Frame: bytes.Clone(s.buf.Bytes())})
	}
	return out, nil
}

// DeleteAccountEvents removes every event of did, as the reference does
// when an account is deleted (before it sequences the #account deleted).
func (s *Sequencer) DeleteAccountEvents(ctx context.Context, did string) error {
	defer s.tail.reset()
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		if err := markLast(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM repo_seq WHERE did = ?`, did)
		return err
	})
}

// DeleteAccountEventsBefore removes every event of did but the one at
// keep: an account's deletion sequences #account deleted, then forgets the
// rest of its history, as the reference does.
func (s *Sequencer) DeleteAccountEventsBefore(ctx context.Context, did string, keep int64) error {
	defer s.tail.reset()
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		if err := markLast(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM repo_seq WHERE did = ? AND seq != ?`, did, keep)
		return err
	})
}

// markLast keeps the newest seq in seq_mark, in the transaction of a
// deletion that may remove its event: readLast takes the larger of it and
// the newest event's, so a seq is never reused. Appends do not write it:
// their newest event is its own record (a page less at every commit).
func markLast(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO seq_mark (id, seq) SELECT 1, max(seq) FROM repo_seq WHERE true HAVING max(seq) IS NOT NULL
		ON CONFLICT (id) DO UPDATE SET seq = max(seq, excluded.seq)`)
	return err
}

// Head is the newest seq, 0 when there is none.
func (s *Sequencer) Head(ctx context.Context) (int64, error) {
	if seq, ok := s.tail.head(); ok {
		return seq, nil
	}
	var seq int64
	err := s.db.Reader().QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM repo_seq`).Scan(&seq)
	return seq, err
}

// LastBefore is the newest seq sequenced before t (0 when none): replay
// from a cursor older than the retention window starts after it. Times
// grow with seq (see Append), so it bisects the log by seq, one rowid
// lookup a step: ~log2 of the seqs' range lookups, where an index on the
// time cost every append a B-tree. (A log written before times were kept
// in order may hold a later seq with an earlier time, by the milliseconds
// a writer waited for the lock: there the answer may be off by the events
// of those milliseconds.)
func (s *Sequencer) LastBefore(ctx context.Context, t time.Time) (int64, error) {
	before := t.UTC().Format(timeFormat)
	var last int64
	err := s.db.Read(ctx, func(tx *sql.Tx) error {
		var lo, hi sql.NullInt64
		// Apart: SQLite answers min or max alone from the B-tree's edge,
		// both in one SELECT by a scan.
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT min(seq) FROM repo_seq), (SELECT max(seq) FROM repo_seq)`).Scan(&lo, &hi); err != nil || !lo.Valid {
			return err
		}
		first, err := tx.PrepareContext(ctx, `SELECT seq, sequenced_at FROM repo_seq WHERE seq >= ? ORDER BY seq LIMIT 1`)
		if err != nil {
			return err
		}
		defer first.Close()
		// Every event below l is before t, none from h up; the first
		// event at or past mid says which side of it t falls.
		l, h := lo.Int64, hi.Int64+1
		for l < h {
			mid := l + (h-l)/2
			var seq int64
			var at string
			if err := first.QueryRowContext(ctx, mid).Scan(&seq, &at); err != nil {
				return err // there is one: mid < h <= max + 1
			}
			if at < before { // the format sorts as the times do
				last, l = seq, seq+1
			} else {
				h = mid
			}
		}
		return nil
	})
	return last, err
}

// After returns up to limit events with seq > after, oldest first: from
// memory when they are among the newest (see tail), else from the database.
func (s *Sequencer) After(ctx context.Context, after int64, limit int) ([]Stored, error) {
	if evs, ok := s.tail.after(after, limit); ok {
		return evs, nil
	}
	rows, err := s.db.Reader().QueryContext(ctx, `SELECT seq, did, event_type, event, sequenced_at FROM repo_seq
		WHERE seq > ? AND invalidated = 0 ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		var e Stored
		var t string
		if err := rows.Scan(&e.Seq, &e.DID, &e.Type, &e.Frame, &t); err != nil {
			return nil, err
		}
		e.Time, _ = time.Parse(timeFormat, t)
		out = append(out, e)
	}
	return out, rows.Err()
}

// notifier wakes waiters after each Append.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *Sequencer) wake() {
	s.n.mu.Lock()
	if s.n.ch != nil {
		close(s.n.ch)
		s.n.ch = nil
	}
	s.n.mu.Unlock()
}

// Changed returns a channel closed at the next Append's commit. Take it,
// read what is there, then wait on it: nothing appended in between is
// missed.
func (s *Sequencer) Changed() <-chan struct{} {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if s.n.ch == nil {
		s.n.ch = make(chan struct{})
	}
	return s.n.ch
}
