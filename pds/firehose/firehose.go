// Package firehose serves com.atproto.sync.subscribeRepos: the sequencer's
// events as WebSocket frames, replayed from a cursor and then live.
//
// Each subscriber reads events from the sequencer database after the last
// seq it sent, woken by the sequencer the moment an append commits (the
// reference polls with backoff; here a frame leaves within a wake-up of its
// commit). Reading from the database rather than from a shared in-memory
// queue makes replay and live one code path with no gap and no duplicate.
// A live subscriber that falls more than MaxBacklog events behind the head
// is cut off with ConsumerTooSlow, as the reference's outbox is: the
// backlog is the events sequenced and not yet handed to its socket, checked
// before each frame, and the error frame goes after the frames already
// sent, so a slow reader reads them, then the error, then the close. A
// consumer that takes nothing for WriteTimeout is cut off without it (the
// reference waits forever). Either way a consumer costs its socket, whose
// kernel buffer is bounded too (SendBuffer), and a page of frames.
package firehose

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/sequencer"
)

// Options tune the firehose; zero values take the defaults.
type Options struct {
	// Retention is how far back a cursor may replay before the stream
	// starts with #info OutdatedCursor; the reference's default is a day.
	Retention time.Duration
	// MaxBacklog is how many events a live subscriber may fall behind the
	// head before it is cut off with ConsumerTooSlow (the reference's
	// buffer: 500).
	MaxBacklog int64
	// WriteTimeout bounds one frame's write, the error frame's and the
	// close's: a consumer that takes nothing for this long is cut off.
	WriteTimeout time.Duration
	// SendBuffer is the kernel send buffer of a subscriber's socket
	// (SO_SNDBUF; 128 KiB when zero, negative: the system's). Left to
	// itself Linux gives a loopback socket megabytes, which a slow reader
	// drains for many seconds before a blocked write wakes (at a third
	// free): the server would see a consumer that reads as one that
	// stalls, and each stalled one would hold those megabytes.
	SendBuffer int
	// ReadAhead bounds the bytes of frames a subscriber holds that it has
	// not sent yet (one page read from the sequencer): what a consumer
	// that stops reading costs, besides its socket. 256 KiB when zero; a
	// single frame larger than it is still sent, one at a time.
	ReadAhead int
	Clock     clock.Clock
	Logger    *slog.Logger
}

// Handler serves subscribeRepos from seq.
type Handler struct {
	seq  *sequencer.Sequencer
	opts Options
	up   websocket.Upgrader

	// http.Server.Shutdown does not touch hijacked connections, so the
	// handler tracks its subscribers to end them on Close.
	mu     sync.Mutex
	conns  map[*websocket.Conn]context.CancelFunc
	closed bool
	wg     sync.WaitGroup
	// A subscription counts from its request, not from when it is tracked:
	// its client may see the upgrade answered before the handler tracks
	// it, and a Drop in between must still end it.
	pending int
	drops   int // how many Drops so far
}

// New returns the subscribeRepos handler.
func New(seq *sequencer.Sequencer, opts Options) *Handler {
	if opts.Retention == 0 {
		opts.Retention = 24 * time.Hour
	}
	if opts.MaxBacklog == 0 {
		opts.MaxBacklog = 500
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.ReadAhead <= 0 {
		opts.ReadAhead = 256 << 10
	}
	if opts.SendBuffer == 0 {
		opts.SendBuffer = 128 << 10
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{seq: seq, opts: opts, conns: map[*websocket.Conn]context.CancelFunc{}, up: websocket.Upgrader{
		// Any origin: this is a test server, and relays are not browsers.
		CheckOrigin: func(*http.Request) bool { return true },
	}}
}

// pageSize is the most events one page reads; ReadAhead bounds it by
// bytes.
const pageSize = 500

// ErrorFrame is an error message frame: header {op: -1}, body {error, message}.
func ErrorFrame(name, message string) []byte {
	h, _ := atdata.MarshalCBOR(map[string]any{"op": int64(-1)})
	b, _ := atdata.MarshalCBOR(map[string]any{"error": name, "message": message})
	return append(h, b...)
}

// InfoFrame is an #info message frame.
func InfoFrame(name, message string) []byte {
	h, _ := atdata.MarshalCBOR(map[string]any{"op": int64(1), "t": "#info"})
	b, _ := atdata.MarshalCBOR(map[string]any{"name": name, "message": message})
	return append(h, b...)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Fix the starting point before the upgrade answers: once the client's
	// dial returns, every later append reaches it. The wake-up channel is
	// taken before the head is read, so an append in between is not missed.
	changed := h.seq.Changed()
	head, err := h.seq.Head(r.Context())
	if err != nil {
		http.Error(w, "sequencer unavailable", http.StatusInternalServerError)
		return
	}
	drops := h.begin()
	conn, err := h.up.Upgrade(w, r, nil)
	if err != nil {
		h.abandon()
		return // the upgrader has answered
	}
	defer conn.Close()
	if b, ok := conn.NetConn().(interface{ SetWriteBuffer(int) error }); ok && h.opts.SendBuffer > 0 {
		_ = b.SetWriteBuffer(h.opts.SendBuffer)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	switch h.track(conn, cancel, drops) {
	case trackClosed:
		h.fail(conn, nil, "InternalServerError", "server shutting down")
		return
	case trackDropped:
		return // a Drop came while it was being upgraded
	}
	defer h.untrack(conn)
	// The client sends nothing but control frames; reading them keeps
	// pongs and its close flowing, and tells us when it has gone.
	go func() {
		defer cancel()
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()
	if err := h.stream(ctx, conn, r.URL.Query().Get("cursor"), head, changed); err != nil {
		var se *streamError
		if errors.As(err, &se) {
			h.fail(conn, ctx.Done(), se.name, se.message)
			return
		}
		if ctx.Err() == nil {
			h.opts.Logger.Debug("firehose subscriber ended", "err", err)
		}
		return
	}
}

// begin counts a subscription about to be upgraded and returns the Drop
// count it starts under.
func (h *Handler) begin() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending++
	return h.drops
}

// abandon uncounts a subscription whose upgrade failed.
func (h *Handler) abandon() {
	h.mu.Lock()
	h.pending--
	h.mu.Unlock()
}

type trackResult int

const (
	tracked trackResult = iota
	trackClosed
	trackDropped
)

// track registers an upgraded subscription, unless the handler closed or
// a Drop came since begin.
func (h *Handler) track(conn *websocket.Conn, cancel context.CancelFunc, drops int) trackResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending--
	switch {
	case h.closed:
		return trackClosed
	case h.drops != drops:
		return trackDropped
	}
	h.conns[conn] = cancel
	h.wg.Add(1)
	return tracked
}

func (h *Handler) untrack(conn *websocket.Conn) {
	h.mu.Lock()
	delete(h.conns, conn)
	h.mu.Unlock()
	h.wg.Done()
}

// Close ends every subscription (with a normal close frame) and waits for
// their goroutines, so nothing reads the sequencer after it closes.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	for conn, cancel := range h.conns {
		cancel()
		deadline := time.Now().Add(time.Second)
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), deadline)
		_ = conn.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// Subscribers is how many subscriptions are being served now.
func (h *Handler) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Drop disconnects every current subscriber (a fault a test injects to
// exercise a consumer's reconnect); new subscriptions are still served.
func (h *Handler) Drop() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drops++
	for conn, cancel := range h.conns {
		cancel()
		_ = conn.Close()
	}
	return len(h.conns) + h.pending
}

type streamError struct{ name, message string }

func (e *streamError) Error() string { return e.name + ": " + e.message }

// fail sends an error frame and closes with 1008 (policy violation), as
// the reference's stream server does, then waits (WriteTimeout at most)
// for the client's close, when gone is its signal. Both frames queue
// behind what the socket holds: a slow reader reaches them once it has
// read that, and each write gets the full WriteTimeout to wait for room.
func (h *Handler) fail(conn *websocket.Conn, gone <-chan struct{}, name, message string) {
	if err := h.write(conn, ErrorFrame(name, message)); err != nil {
		return
	}
	if err := conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, name), time.Now().Add(h.opts.WriteTimeout)); err != nil || gone == nil {
		return
	}
	// Closing at once could reset the connection when the client's close
	// reply arrives, and a reset may drop what its kernel holds unread.
	t := time.NewTimer(h.opts.WriteTimeout)
	defer t.Stop()
	select {
	case <-gone:
	case <-t.C:
	}
}

func (h *Handler) stream(ctx context.Context, conn *websocket.Conn, cursorParam string, head int64, changed <-chan struct{}) error {
	last := head // no cursor: live from now
	if cursorParam != "" {
		cursor, err := strconv.ParseInt(cursorParam, 10, 64)
		if err != nil || cursor < 0 {
			return &streamError{"InvalidRequest", "cursor must be a non-negative integer"}
		}
		if cursor > head {
			return &streamError{"FutureCursor", "Cursor in the future."}
		}
		last = cursor
		cutoff := h.opts.Clock.Now().Add(-h.opts.Retention)
		next, err := h.seq.After(ctx, cursor, 1)
		if err != nil {
			return err
		}
		if len(next) == 1 && next[0].Time.Before(cutoff) {
			if err := h.write(conn, InfoFrame("OutdatedCursor", "Requested cursor exceeded limit. Possibly missing events")); err != nil {
				return err
			}
			if last, err = h.seq.LastBefore(ctx, cutoff); err != nil {
				return err
			}
		}
	}
	caughtUp := cursorParam == ""
	limit := 16 // grown or shrunk to hold about ReadAhead bytes
	for {
		asked := limit
		events, err := h.seq.After(ctx, last, asked)
		if err != nil {
			return err
		}
		size := 0
		for i, e := range events {
			// Live, the backlog is checked before each frame, as the
			// reference's outbox checks its buffer before each event:
			// a consumer whose socket holds up the writes falls behind
			// while it waits, and is cut at the next frame.
			if caughtUp {
				if head, err := h.seq.Head(ctx); err == nil && head-last > h.opts.MaxBacklog {
					return &streamError{"ConsumerTooSlow", "Stream consumer too slow"}
				}
			}
			if err := h.write(conn, e.Frame); err != nil {
				return err
			}
			last = e.Seq
			size += len(e.Frame)
			events[i] = sequencer.Stored{} // sent: its frame may go
		}
		if len(events) > 0 {
			limit = max(1, min(pageSize, h.opts.ReadAhead*len(events)/max(size, 1)))
		}
		if len(events) == asked {
			continue // more to replay
		}
		caughtUp = true
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			changed = h.seq.Changed()
		}
	}
}

func (h *Handler) write(conn *websocket.Conn, frame []byte) error {
	if err := conn.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout)); err != nil {
		return err
	}
	return conn.WriteMessage(websocket.BinaryMessage, frame)
}
