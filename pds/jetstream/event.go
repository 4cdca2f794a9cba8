package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"

	"github.com/fakepds/fakepds/pds/jsvalue"
	"github.com/fakepds/fakepds/pds/sequencer"
)

// Event kinds and commit operations, as Jetstream names them.
const (
	KindCommit   = "commit"
	KindIdentity = "identity"
	KindAccount  = "account"
	KindSync     = "sync" // v2 only: v1 Jetstream never sends #sync

	OpCreate = "create"
	OpUpdate = "update"
	OpDelete = "delete"
)

// Event is one Jetstream event, as it goes on the wire.
type Event struct {
	DID    string `json:"did"`
	TimeUS int64  `json:"time_us"`
	// Cursor is seq*1000 + the op's index in its commit: a ?cursor=
	// that resumes exactly here (today's Jetstream sends its own seq).
	Cursor   int64                                   `json:"cursor"`
	Kind     string                                  `json:"kind"`
	Commit   *Commit                                 `json:"commit,omitempty"`
	Account  *comatproto.SyncSubscribeRepos_Account  `json:"account,omitempty"`
	Identity *comatproto.SyncSubscribeRepos_Identity `json:"identity,omitempty"`
	Sync     *comatproto.SyncSubscribeRepos_Sync     `json:"sync,omitempty"`
}

// Commit is one op of a repo commit. Record and CID are empty for a delete.
type Commit struct {
	Rev        string          `json:"rev"`
	Operation  string          `json:"operation"`
	Collection string          `json:"collection"`
	RKey       string          `json:"rkey"`
	Record     json.RawMessage `json:"record,omitempty"`
	CID        string          `json:"cid,omitempty"`
}

// opsPerSeq spaces the cursors of one sequencer event's ops; a commit has
// at most 200 (applyWrites' limit).
const opsPerSeq = 1000

// CursorOf is the cursor of op i of the event at seq.
func CursorOf(seq int64, i int) int64 { return seq*opsPerSeq + int64(i) }

// decoded is one sequencer event as Jetstream events without their times:
// the stamper gives those.
type decoded struct {
	seq    int64
	ms     int64  // the event's sequenced time, unix milliseconds
	did    string // a #commit's or #sync's repo, with its rev
	rev    string
	events []Event
}

// headers are the stored frames' CBOR headers, by event type: a frame is
// its header then its body.
var headers = func() map[string][]byte {
	m := map[string][]byte{}
	for typ, t := range map[string]string{
		sequencer.TypeCommit: "#commit", sequencer.TypeSync: "#sync",
		sequencer.TypeIdentity: "#identity", sequencer.TypeAccount: "#account",
	} {
		b, err := atdata.MarshalCBOR(map[string]any{"op": int64(1), "t": t})
		if err != nil {
			panic(err)
		}
		m[typ] = b
	}
	return m
}()

func body(e sequencer.Stored) (*bytes.Reader, error) {
	h, ok := headers[e.Type]
	if !ok || !bytes.HasPrefix(e.Frame, h) {
		return nil, fmt.Errorf("jetstream: seq %d: a %q frame without its header", e.Seq, e.Type)
	}
	return bytes.NewReader(e.Frame[len(h):]), nil
}

// decode turns a stored event into its Jetstream events: one per op of a
// commit, one for an identity, account or #sync event (the v1 wire skips
// #sync), none for a commit too big to carry its blocks.
func decode(e sequencer.Stored) (decoded, error) {
	d := decoded{seq: e.Seq, ms: e.Time.UnixMilli()}
	r, err := body(e)
	if err != nil {
		return d, err
	}
	switch e.Type {
	case sequencer.TypeIdentity:
		var id comatproto.SyncSubscribeRepos_Identity
		if err := id.UnmarshalCBOR(r); err != nil {
			return d, fmt.Errorf("jetstream: seq %d: %w", e.Seq, err)
		}
		d.events = []Event{{DID: id.Did, Cursor: CursorOf(e.Seq, 0), Kind: KindIdentity, Identity: &id}}
	case sequencer.TypeAccount:
		var acc comatproto.SyncSubscribeRepos_Account
		if err := acc.UnmarshalCBOR(r); err != nil {
			return d, fmt.Errorf("jetstream: seq %d: %w", e.Seq, err)
		}
		d.events = []Event{{DID: acc.Did, Cursor: CursorOf(e.Seq, 0), Kind: KindAccount, Account: &acc}}
	case sequencer.TypeSync:
		var sy comatproto.SyncSubscribeRepos_Sync
		if err := sy.UnmarshalCBOR(r); err != nil {
			return d, fmt.Errorf("jetstream: seq %d: %w", e.Seq, err)
		}
		d.did, d.rev = sy.Did, sy.Rev
		d.events = []Event{{DID: sy.Did, Cursor: CursorOf(e.Seq, 0), Kind: KindSync, Sync: &sy}}
	case sequencer.TypeCommit:
		var c comatproto.SyncSubscribeRepos_Commit
		if err := c.UnmarshalCBOR(r); err != nil {
			return d, fmt.Errorf("jetstream: seq %d: %w", e.Seq, err)
		}
		d.did, d.rev = c.Repo, c.Rev
		d.events, err = commitEvents(e.Seq, &c)
		if err != nil {
			return d, fmt.Errorf("jetstream: seq %d: %w", e.Seq, err)
		}
	}
	return d, nil
}

func commitEvents(seq int64, c *comatproto.SyncSubscribeRepos_Commit) ([]Event, error) {
	if c.TooBig || len(c.Ops) == 0 {
		return nil, nil
	}
	blocks, err := readBlocks(c.Blocks)
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(c.Ops))
	for i, op := range c.Ops {
		collection, rkey, ok := strings.Cut(op.Path, "/")
		if !ok {
			return nil, fmt.Errorf("op path %q", op.Path)
		}
		cm := &Commit{Rev: c.Rev, Operation: op.Action, Collection: collection, RKey: rkey}
		switch op.Action {
		case OpCreate, OpUpdate:
			if op.Cid == nil {
				return nil, fmt.Errorf("%s of %s without a cid", op.Action, op.Path)
			}
			id := cid.Cid(*op.Cid)
			raw, ok := blocks[id]
			if !ok {
				return nil, fmt.Errorf("%s of %s: record %s is not in the commit's blocks", op.Action, op.Path, id)
			}
			if cm.Record, err = recordJSON(raw); err != nil {
				return nil, fmt.Errorf("record %s: %w", op.Path, err)
			}
			cm.CID = id.String()
		case OpDelete:
		default:
			return nil, fmt.Errorf("op action %q", op.Action)
		}
		out = append(out, Event{DID: c.Repo, Cursor: CursorOf(seq, i), Kind: KindCommit, Commit: cm})
	}
	return out, nil
}

// readBlocks indexes a commit's CAR slice by CID.
func readBlocks(b []byte) (map[cid.Cid][]byte, error) {
	cr, err := car.NewCarReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("commit blocks: %w", err)
	}
	m := map[cid.Cid][]byte{}
	for {
		blk, err := cr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return m, nil
			}
			return nil, fmt.Errorf("commit blocks: %w", err)
		}
		m[blk.Cid()] = blk.RawData()
	}
}

// recordJSON is a record's DAG-CBOR as atproto's JSON data model writes it
// ($link, $bytes, blobs), keys sorted as Jetstream's encoder sorts them.
func recordJSON(raw []byte) (json.RawMessage, error) {
	rec, err := atdata.UnmarshalCBOR(raw)
	if err != nil {
		return nil, err
	}
	return jsvalue.Marshal(rec) // a post's "<" stays "<"
}

// stamper gives time_us along a walk of the event log in seq order: the
// event's sequenced millisecond times 1000, plus its place among the
// events (ops, and identity, account and #sync events) of that
// millisecond (saturating at 999). A walk that starts before an event's
// millisecond stamps it as any other such walk does (see walkBefore).
// Times never go back in seq order; the latest millisecond seen is taken
// all the same, so that time_us never goes down in a log written before
// the sequencer kept them so.
type stamper struct {
	ms   int64
	next int64
}

// stamp sets the times of d's events; it must see every event of the walk,
// wanted or not, in order.
func (s *stamper) stamp(d *decoded) {
	if ms := max(d.ms, s.ms); ms != s.ms {
		s.ms, s.next = ms, 0
	}
	for i := range d.events {
		d.events[i].TimeUS = s.ms*1000 + min(s.next, 999)
		s.next++
	}
}
