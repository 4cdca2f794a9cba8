package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/bluesky-social/jetstream/pkg/models"
	"github.com/gorilla/websocket"
	"github.com/klauspost/compress/zstd"

	"github.com/fakepds/fakepds/internal/sockbuf"
	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/jsvalue"
	"github.com/fakepds/fakepds/pds/sequencer"
)

// Path is where the PDS mounts the handler, as Jetstream serves it.
const Path = "/subscribe"

// Options tune the handler; zero values take the defaults.
type Options struct {
	// Lookback is how far back a cursor replays; an older one starts at
	// the oldest event within it, silently, as Jetstream's v1 does. The
	// default is Jetstream's, 36 hours.
	Lookback time.Duration
	// MaxBacklog is how many sequencer events a live subscriber may fall
	// behind the head before it is cut off (default 50,000: the size of
	// the legacy Jetstream's per-subscriber outbox). The backlog is the
	// events sequenced and not yet handed to its socket, checked before
	// each frame, so a reader whose socket holds up the writes is cut at
	// the next frame, after those already sent.
	MaxBacklog int64
	// WriteTimeout bounds one frame's write, the error frame's and the
	// close's (default 10 s, Jetstream's): a subscriber that takes nothing
	// for this long is let go.
	WriteTimeout time.Duration
	// SendBuffer is the kernel send buffer of a subscriber's socket
	// (sockbuf.SubscriberSend when zero; negative: the system's), what a
	// subscriber that stops reading holds in the kernel.
	SendBuffer int
	Clock      clock.Clock
	Logger     *slog.Logger
}

// Handler serves /subscribe from a sequencer.
type Handler struct {
	seq  *sequencer.Sequencer
	opts Options
	up   websocket.Upgrader
	upV2 websocket.Upgrader // echoes the xrpc.v1.json subprotocol

	// Upgraded connections are hijacked: http.Server.Shutdown does not
	// end them, Close does.
	mu     sync.Mutex
	conns  map[*websocket.Conn]context.CancelFunc
	closed bool
	wg     sync.WaitGroup
}

// New returns the /subscribe handler.
func New(seq *sequencer.Sequencer, opts Options) *Handler {
	if opts.Lookback == 0 {
		opts.Lookback = 36 * time.Hour
	}
	if opts.MaxBacklog == 0 {
		opts.MaxBacklog = 50_000
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.SendBuffer == 0 {
		opts.SendBuffer = sockbuf.SubscriberSend
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	anyOrigin := func(*http.Request) bool { return true } // browsers are welcome, as on Jetstream
	return &Handler{seq: seq, opts: opts, conns: map[*websocket.Conn]context.CancelFunc{},
		up:   websocket.Upgrader{CheckOrigin: anyOrigin},
		upV2: websocket.Upgrader{CheckOrigin: anyOrigin, Subprotocols: []string{Subprotocol}},
	}
}

// encoder compresses as the legacy Jetstream does (its dictionary, a
// 128 KiB window), so its decoder reads our frames. EncodeAll is safe for
// concurrent use.
var encoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderDict(models.ZSTDDictionary),
		zstd.WithWindowSize(1<<17), zstd.WithEncoderConcurrency(1))
})

// Dictionary is the zstd dictionary compressed frames need: Jetstream's,
// from its Go module.
func Dictionary() []byte { return models.ZSTDDictionary }

// subscription is one subscriber's fixed choices; its filter changes with
// options_update (v1 only).
type subscription struct {
	conn     *websocket.Conn
	v2       bool // network.bsky.jetstream.subscribeEvents framing
	compress bool
	filter   atomic.Pointer[filter]
	hello    chan struct{} // closed by the first valid options_update
	helloed  sync.Once
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		http.Error(w, fmt.Sprintf("%v: %v", ErrInvalidOptions, err), http.StatusBadRequest)
		return
	}
	compress := q.Get("compress") == "true" || strings.Contains(r.Header.Get("Socket-Encoding"), "zstd")
	if compress && strings.Contains(r.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate") {
		// Today's Jetstream refuses both at once; it would compress twice.
		http.Error(w, "choose one compression scheme: custom zstd (compress=true / Socket-Encoding: zstd) or permessage-deflate, not both", http.StatusBadRequest)
		return
	}
	f, err := newFilter(q["wantedCollections"], q["wantedDids"], maxSizeParam(q.Get("maxMessageSizeBytes")))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.serve(w, r, &subscription{compress: compress}, f, q.Get("cursor"), q.Get("requireHello") == "true")
}

// refusal is an answer before the upgrade: plain text on v1, an XRPC
// error body on v2.
type refusal struct {
	status        int
	name, message string
}

func (h *Handler) refuse(w http.ResponseWriter, sub *subscription, r refusal) {
	if !sub.v2 {
		http.Error(w, r.message, r.status)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(r.status)
	body, _ := json.Marshal(map[string]string{"error": r.name, "message": r.message})
	_, _ = w.Write(body)
}

// serve upgrades a subscriber whose options are checked and streams to it.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, sub *subscription, f *filter, cursor string, requireHello bool) {
	// The starting point is fixed before the upgrade answers: once the
	// client's dial returns, every later append reaches it. The wake-up
	// channel is taken before the head is read, so an append in between
	// is not missed.
	changed := h.seq.Changed()
	start, err := h.start(r.Context(), cursor, sub.v2)
	if err != nil {
		var bad badCursor
		var old cursorTooOld
		switch {
		case errors.As(err, &bad):
			h.refuse(w, sub, refusal{http.StatusBadRequest, "InvalidRequest", bad.Error()})
		case errors.As(err, &old):
			h.refuse(w, sub, refusal{http.StatusBadRequest, "CursorTooOld", old.Error()})
		default:
			h.opts.Logger.Error("jetstream: starting point", "err", err)
			h.refuse(w, sub, refusal{http.StatusServiceUnavailable, "ServiceUnavailable", "event log unavailable"})
		}
		return
	}

	up := &h.up
	if sub.v2 {
		up = &h.upV2
	}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	defer conn.Close()
	_ = sockbuf.SetSendBuffer(conn.NetConn(), h.opts.SendBuffer)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	if !h.track(conn, cancel) {
		h.closeWith(conn, websocket.CloseGoingAway, "server shutting down")
		return
	}
	defer h.untrack(conn)

	sub.conn, sub.hello = conn, make(chan struct{})
	sub.filter.Store(f)
	conn.SetReadLimit(MaxMessageBytes)
	go func() {
		defer cancel()
		if sub.v2 {
			h.readV2(sub)
		} else {
			h.read(sub)
		}
	}()
	if requireHello {
		select {
		case <-sub.hello:
		case <-ctx.Done():
			return
		}
	}
	if sub.v2 && start.outdated != 0 {
		// A time cursor before the lookback starts at its beginning;
		// v2 says so first, as Jetstream does.
		if err := h.writeFrame(sub, outdatedCursorFrame(start.outdated)); err != nil {
			return
		}
	}
	if err := h.stream(ctx, sub, start, changed); err != nil && ctx.Err() == nil {
		var slow tooSlow
		if errors.As(err, &slow) {
			h.cut(sub, ctx.Done(), slow)
			return
		}
		h.opts.Logger.Debug("jetstream subscriber ended", "err", err)
	}
}

// read applies the subscriber's options_update messages; a malformed or
// invalid one ends the subscription, as on Jetstream, and other types are
// ignored.
func (h *Handler) read(sub *subscription) {
	for {
		typ, msg, err := sub.conn.ReadMessage()
		if err != nil {
			return
		}
		if typ != websocket.TextMessage {
			continue
		}
		var m subscriberMessage
		if err := json.Unmarshal(msg, &m); err != nil {
			h.closeWith(sub.conn, websocket.CloseInvalidFramePayloadData, "bad subscriber sourced message")
			return
		}
		if m.Type != "options_update" {
			continue
		}
		var u OptionsUpdate
		if err := json.Unmarshal(m.Payload, &u); err != nil {
			h.closeWith(sub.conn, websocket.CloseInvalidFramePayloadData, "bad options_update payload")
			return
		}
		f, err := newFilter(u.WantedCollections, u.WantedDIDs, u.MaxMessageSizeBytes)
		if err != nil {
			h.closeWith(sub.conn, websocket.ClosePolicyViolation, err.Error())
			return
		}
		sub.filter.Store(f)
		sub.helloed.Do(func() { close(sub.hello) })
	}
}

// cut ends a subscriber too slow: v2's ConsumerTooSlow error frame (v1,
// as Jetstream's, has none), the close 1008, then the client's close is
// awaited (gone, WriteTimeout at most). Both frames queue behind what the
// socket holds: a slow reader reaches them once it has read that, and
// each write gets the full WriteTimeout to wait for room.
func (h *Handler) cut(sub *subscription, gone <-chan struct{}, slow tooSlow) {
	if sub.v2 {
		if err := h.writeFrame(sub, errorFrame("ConsumerTooSlow", slow.Error())); err != nil {
			return
		}
	}
	msg := websocket.FormatCloseMessage(websocket.ClosePolicyViolation, slow.Error())
	if err := sub.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(h.opts.WriteTimeout)); err != nil {
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

// closeWith sends a close frame (its reason cut to what a frame holds) and
// closes the connection.
func (h *Handler) closeWith(conn *websocket.Conn, code int, reason string) {
	if len(reason) > 123 {
		cut := 120
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut] + "..."
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	_ = conn.Close()
}

func (h *Handler) track(conn *websocket.Conn, cancel context.CancelFunc) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.conns[conn] = cancel
	h.wg.Add(1)
	return true
}

func (h *Handler) untrack(conn *websocket.Conn) {
	h.mu.Lock()
	delete(h.conns, conn)
	h.mu.Unlock()
	h.wg.Done()
}

// Close ends every subscription (with a going-away close frame) and waits
// for them, so nothing reads the sequencer after it closes.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	for conn, cancel := range h.conns {
		cancel()
		h.closeWith(conn, websocket.CloseGoingAway, "server shutting down")
	}
	h.mu.Unlock()
	h.wg.Wait()
}

type badCursor struct{ raw string }

func (b badCursor) Error() string { return "invalid cursor: " + b.raw }

// cursorTooOld refuses a v2 seq cursor before the lookback, as Jetstream
// does (v1 starts at the lookback's beginning instead).
type cursorTooOld struct{ cursor, floor int64 }

func (c cursorTooOld) Error() string {
	return fmt.Sprintf("cursor %d below lookback floor %d; re-backfill from your last seq", c.cursor, c.floor)
}

type tooSlow struct{ behind int64 }

func (s tooSlow) Error() string {
	return fmt.Sprintf("consumer too slow: %d events behind", s.behind)
}

// seqCursorLimit splits the cursor's two readings, as today's Jetstream
// does: below it a seq cursor, from it on unix microseconds.
const seqCursorLimit = 1_000_000_000_000_000

// position is where a walk starts (after seq after) and the first op it
// sends: every op before from is stamped but not sent. outdated, when not
// 0, is the cursor of the lookback's first event, where a time cursor
// older than the lookback starts.
type position struct {
	after    int64
	from     func(e *Event) bool
	outdated int64
}

// start resolves the cursor parameter; v2 refuses a seq cursor older than
// the lookback.
func (h *Handler) start(ctx context.Context, raw string, v2 bool) (position, error) {
	head, err := h.seq.Head(ctx)
	if err != nil {
		return position{}, err
	}
	live := func() (position, error) {
		// The walk starts before the head, so that the events after it
		// are stamped as every walk stamps them.
		after, err := h.walkBefore(ctx, head)
		return position{after: after, from: func(e *Event) bool { return e.Cursor >= CursorOf(head+1, 0) }}, err
	}
	if raw == "" {
		return live()
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return position{}, badCursor{raw}
	}
	now := h.opts.Clock.Now()
	floor := now.Add(-h.opts.Lookback).UnixMicro()
	if n < seqCursorLimit {
		seq := n / opsPerSeq
		if seq > head {
			return live()
		}
		evs, err := h.seq.After(ctx, max(seq-1, 0), 1)
		if err != nil {
			return position{}, err
		}
		if len(evs) == 0 {
			return live()
		}
		if evs[0].Time.UnixMicro() >= floor {
			after, err := h.walkBefore(ctx, evs[0].Seq)
			return position{after: after, from: func(e *Event) bool { return e.Cursor >= n }}, err
		}
		if v2 {
			last, err := h.seq.LastBefore(ctx, time.UnixMicro(floor))
			if err != nil {
				return position{}, err
			}
			return position{}, cursorTooOld{n, CursorOf(last+1, 0)}
		}
		n = floor // older than the lookback: from its start
	} else if n >= (now.UnixMilli()+1)*1000 {
		// Future. Not n > now: an event's time_us may run up to 999 µs
		// past its millisecond, and a cursor at it must replay it.
		return live()
	}
	var outdated int64
	if n < floor {
		last, err := h.seq.LastBefore(ctx, time.UnixMicro(floor))
		if err != nil {
			return position{}, err
		}
		outdated, n = CursorOf(last+1, 0), floor
	}
	// The walk starts before the first event of n's millisecond.
	after, err := h.seq.LastBefore(ctx, time.UnixMilli(n/1000))
	return position{after: after, from: func(e *Event) bool { return e.TimeUS >= n }, outdated: outdated}, err
}

// walkBefore is the seq to walk from so that the event at seq is stamped
// as every walk stamps it: the last before its millisecond, since the
// stamper counts the events of a millisecond from its first. Times never
// go back in seq order (the sequencer keeps them so), so every event
// between that one and seq has seq's millisecond.
func (h *Handler) walkBefore(ctx context.Context, seq int64) (int64, error) {
	if seq == 0 {
		return 0, nil
	}
	evs, err := h.seq.After(ctx, seq-1, 1)
	if err != nil || len(evs) == 0 {
		return seq, err
	}
	return h.seq.LastBefore(ctx, evs[0].Time)
}

const pageSize = 500

// stream walks the event log from start and sends what the subscriber
// wants, then follows the log live.
func (h *Handler) stream(ctx context.Context, sub *subscription, start position, changed <-chan struct{}) error {
	from := start.from
	w := walk{revs: map[string]string{}, last: start.after}
	ping := time.NewTicker(30 * time.Second)
	defer ping.Stop()
	for {
		stored, err := h.seq.After(ctx, w.last, pageSize)
		if err != nil {
			return err
		}
		for _, e := range stored {
			if err := h.send(ctx, sub, e, &w, &from); err != nil {
				return err
			}
			w.last = e.Seq
		}
		if len(stored) == pageSize {
			continue // more to replay
		}
		w.live = true
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			changed = h.seq.Changed()
		case <-ping.C:
			if err := sub.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(h.opts.WriteTimeout)); err != nil {
				return err
			}
		}
	}
}

// walk is what a subscriber's walk of the log keeps: its stamper, (v2)
// the rev each repo's last #commit or #sync gave so far, and how far it
// has gone.
type walk struct {
	stamper
	revs map[string]string
	last int64 // the seq of the last event handed to the socket whole
	live bool  // caught up once: from now on the backlog is bounded
}

// send stamps one stored event's Jetstream events and writes those the
// subscriber wants. from is the walk's start, nil once it is passed.
func (h *Handler) send(ctx context.Context, sub *subscription, e sequencer.Stored, w *walk, from *func(*Event) bool) error {
	d, err := decode(e)
	if err != nil {
		// One event we cannot read must not end every subscription.
		h.opts.Logger.Error("jetstream: skipping an event", "err", err)
		return nil
	}
	w.stamp(&d)
	if sub.v2 && d.rev != "" {
		if stale, err := w.staleSync(ctx, h.seq, &d); err != nil {
			return err
		} else if stale {
			return nil
		}
	}
	f := sub.filter.Load()
	for i := range d.events {
		ev := &d.events[i]
		if *from != nil {
			if !(*from)(ev) {
				continue
			}
			*from = nil
		}
		if (ev.Kind == KindSync && !sub.v2) || !f.wants(ev) {
			continue
		}
		var msg []byte
		if sub.v2 {
			msg, err = messageFrame(ev)
		} else {
			msg, err = jsvalue.Marshal(ev)
		}
		if err != nil {
			return err
		}
		if f.maxSize > 0 && len(msg) > f.maxSize {
			continue // as Jetstream: measured before compression
		}
		if w.live {
			// Checked before each frame, as the legacy Jetstream's outbox
			// filled per event: a reader whose socket holds up the
			// writes falls behind while it waits, and is cut here.
			if head, err := h.seq.Head(ctx); err == nil && head-w.last > h.opts.MaxBacklog {
				return tooSlow{head - w.last}
			}
		}
		if err := h.writeFrame(sub, msg); err != nil {
			return err
		}
	}
	return nil
}

// staleSync: Jetstream's verifier drops a #sync whose rev is not past the
// repo's last one (activateAccount's carries the repo's current rev), so
// v2 drops it too. The repo's last rev comes from the walk, or the log
// when the walk has not seen the repo yet.
func (w *walk) staleSync(ctx context.Context, seq *sequencer.Sequencer, d *decoded) (bool, error) {
	prev, seen := w.revs[d.did]
	w.revs[d.did] = d.rev
	if len(d.events) == 0 || d.events[0].Kind != KindSync {
		return false, nil
	}
	if !seen {
		st, err := seq.RepoStateBefore(ctx, d.did, d.seq)
		if err != nil {
			return false, err
		}
		prev = st.Rev
	}
	return prev != "" && d.rev <= prev, nil // TIDs sort as they count
}

// writeFrame writes one frame, compressed if the subscriber asked.
func (h *Handler) writeFrame(sub *subscription, msg []byte) error {
	typ := websocket.TextMessage
	if sub.compress {
		enc, err := encoder()
		if err != nil {
			return err
		}
		msg, typ = enc.EncodeAll(msg, nil), websocket.BinaryMessage
	}
	if err := sub.conn.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout)); err != nil {
		return err
	}
	return sub.conn.WriteMessage(typ, msg)
}

// URL is the ws:// (or wss://) URL of the Jetstream of the PDS at pdsURL.
func URL(pdsURL string) string {
	return "ws" + strings.TrimPrefix(strings.TrimSuffix(pdsURL, "/"), "http") + Path
}
