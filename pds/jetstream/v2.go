package jetstream

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/pds/jsvalue"
)

// The v2 stream and its dictionary, at their XRPC paths, and the one
// subprotocol v2 speaks (atproto proposal 0015's JSON framing; also the
// lexicon's default, so a client that offers none gets the same frames).
const (
	NSIDv2         = "network.bsky.jetstream.subscribeEvents"
	PathV2         = "/xrpc/" + NSIDv2
	PathDictionary = "/xrpc/network.bsky.jetstream.getZstdDictionary"
	Subprotocol    = "xrpc.v1.json"
)

// DictionaryID is the ID in the header of Dictionary (a structured zstd
// dictionary): the zstdDictionary a v2 subscriber names to get frames
// compressed with it.
var DictionaryID = binary.LittleEndian.Uint32(Dictionary()[4:8])

// V2 serves network.bsky.jetstream.subscribeEvents from the same event
// log as /subscribe: each frame is {"$type":"message","payload":...}, the
// payload one of the lexicon's #commit, #identity, #account, #sync (sent
// here, never on v1) or #info; seq is the v1 cursor (seq*1000 + op index)
// and time the v1 time_us as an RFC 3339 time. Filters are the query's
// kinds, dids and collections; the stream is server-push only.
func (h *Handler) V2() http.Handler { return http.HandlerFunc(h.serveV2) }

func (h *Handler) serveV2(w http.ResponseWriter, r *http.Request) {
	sub := &subscription{v2: true}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		h.refuse(w, sub, refusal{http.StatusBadRequest, "InvalidRequest", fmt.Sprintf("%v: %v", ErrInvalidOptions, err)})
		return
	}
	if q.Get("compress") == "true" || strings.Contains(r.Header.Get("Socket-Encoding"), "zstd") {
		h.refuse(w, sub, refusal{http.StatusBadRequest, "InvalidRequest",
			"compress=true / Socket-Encoding: zstd is the /subscribe (v1) opt-in; this endpoint uses zstdDictionary=<id> with the dictionary from getZstdDictionary"})
		return
	}
	if raw := q.Get("zstdDictionary"); raw != "" {
		id, err := strconv.ParseUint(raw, 10, 32)
		if err != nil || id == 0 {
			h.refuse(w, sub, refusal{http.StatusBadRequest, "InvalidRequest", "zstdDictionary must be a positive integer zstd dictionary ID"})
			return
		}
		if uint32(id) != DictionaryID {
			h.refuse(w, sub, refusal{http.StatusBadRequest, "UnknownZstdDictionary", fmt.Sprintf(
				"unknown zstd dictionary id %d; current dictionary id is %d (fetch it via getZstdDictionary and reconnect)", id, DictionaryID)})
			return
		}
		sub.compress = true
	}
	f, err := filterV2(q)
	if err != nil {
		h.refuse(w, sub, refusal{http.StatusBadRequest, "InvalidRequest", err.Error()})
		return
	}
	h.serve(w, r, sub, f, q.Get("cursor"), false)
}

// filterV2 checks v2's query as Jetstream does: stricter than v1 (raw
// counts are capped, a wildcard's head must be an NSID prefix, kinds are
// the lexicon's, v1's parameter names are refused by name).
func filterV2(q url.Values) (*filter, error) {
	for name, use := range map[string]string{"wantedDids": "use dids", "wantedCollections": "use collections",
		"requireHello": "this endpoint is server-push only"} {
		if _, ok := q[name]; ok {
			return nil, fmt.Errorf("%w: %s is a /subscribe (v1) parameter; %s", ErrInvalidOptions, name, use)
		}
	}
	kinds := q["kinds"]
	if len(kinds) > 4 {
		return nil, fmt.Errorf("%w: too many kinds values: %d > 4", ErrInvalidOptions, len(kinds))
	}
	if n := len(q["dids"]); n > MaxWantedDIDs {
		return nil, fmt.Errorf("%w: too many dids values: %d > %d", ErrInvalidOptions, n, MaxWantedDIDs)
	}
	if n := len(q["collections"]); n > MaxWantedCollections {
		return nil, fmt.Errorf("%w: too many collections values: %d > %d", ErrInvalidOptions, n, MaxWantedCollections)
	}
	for _, c := range q["collections"] {
		if head, ok := strings.CutSuffix(c, ".*"); ok {
			if _, err := syntax.ParseNSID(head + ".x"); err != nil {
				return nil, fmt.Errorf("%w: invalid collection wildcard: %s", ErrInvalidOptions, c)
			}
		}
	}
	maxSize := 0
	if vs, ok := q["maxMessageSizeBytes"]; ok {
		n, err := strconv.ParseUint(vs[0], 10, 32)
		if len(vs) != 1 || err != nil {
			return nil, fmt.Errorf("%w: maxMessageSizeBytes must be one unsigned 32-bit integer", ErrInvalidOptions)
		}
		maxSize = int(n)
	}
	f, err := newFilter(q["collections"], q["dids"], maxSize)
	if err != nil {
		return nil, err
	}
	if len(kinds) > 0 {
		f.kinds = map[string]bool{}
		for _, k := range kinds {
			switch k {
			case KindCommit, KindIdentity, KindAccount, KindSync:
				f.kinds[k] = true
			default:
				return nil, fmt.Errorf("%w: unknown kind %q (valid: commit, identity, account, sync)", ErrInvalidOptions, k)
			}
		}
		if f.collections != nil && !f.kinds[KindCommit] {
			return nil, fmt.Errorf("%w: collections filter can never apply: kinds excludes commit", ErrInvalidOptions)
		}
	}
	return f, nil
}

// readV2: v2 takes no messages from the subscriber; one ends the stream,
// as on Jetstream (pings and pongs are answered by the connection).
func (h *Handler) readV2(sub *subscription) {
	if _, _, err := sub.conn.ReadMessage(); err == nil {
		h.closeWith(sub.conn, websocket.ClosePolicyViolation, "unexpected data message")
	}
}

// ServeDictionary answers network.bsky.jetstream.getZstdDictionary: the
// dictionary v2 frames are compressed with, by its ID or the current one.
// It is Jetstream's v1 dictionary (see Dictionary), so its ID is not
// Jetstream's v2 dictionary's; a client takes whichever the server names.
func (h *Handler) ServeDictionary(w http.ResponseWriter, r *http.Request) {
	sub := &subscription{v2: true}
	if raw := r.URL.Query().Get("id"); raw != "" {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			h.refuse(w, sub, refusal{http.StatusBadRequest, "InvalidRequest", "id must be an integer zstd dictionary ID"})
			return
		}
		if id != int64(DictionaryID) {
			h.refuse(w, sub, refusal{http.StatusNotFound, "DictionaryNotFound",
				fmt.Sprintf("no dictionary with id %d; current dictionary id is %d", id, DictionaryID)})
			return
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	_, _ = w.Write(Dictionary())
}

// The v2 payloads, their fields in the order Jetstream's generated
// encoder writes them (sorted).
type (
	commitV2 struct {
		Type       string          `json:"$type"`
		CID        string          `json:"cid,omitempty"`
		Collection string          `json:"collection"`
		DID        string          `json:"did"`
		Operation  string          `json:"operation"`
		Record     json.RawMessage `json:"record,omitempty"`
		Rev        string          `json:"rev"`
		RKey       string          `json:"rkey"`
		Seq        int64           `json:"seq"`
		Time       string          `json:"time"`
	}
	identityV2 struct {
		Type     string                                  `json:"$type"`
		DID      string                                  `json:"did"`
		Identity *comatproto.SyncSubscribeRepos_Identity `json:"identity"`
		Seq      int64                                   `json:"seq"`
		Time     string                                  `json:"time"`
	}
	accountV2 struct {
		Type    string                                 `json:"$type"`
		Account *comatproto.SyncSubscribeRepos_Account `json:"account"`
		DID     string                                 `json:"did"`
		Seq     int64                                  `json:"seq"`
		Time    string                                 `json:"time"`
	}
	syncV2 struct {
		Type string                              `json:"$type"`
		DID  string                              `json:"did"`
		Seq  int64                               `json:"seq"`
		Sync *comatproto.SyncSubscribeRepos_Sync `json:"sync"`
		Time string                              `json:"time"`
	}
	infoV2 struct {
		Type    string `json:"$type"`
		Message string `json:"message,omitempty"`
		Name    string `json:"name"`
	}
)

// wireTime is time_us as v2 writes it: RFC 3339 in UTC with exactly six
// fractional digits.
func wireTime(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000000Z")
}

// messageFrame is e as one v2 message frame.
func messageFrame(e *Event) ([]byte, error) {
	typ, at := NSIDv2+"#"+e.Kind, wireTime(e.TimeUS)
	var payload any
	switch e.Kind {
	case KindCommit:
		c := e.Commit
		payload = commitV2{typ, c.CID, c.Collection, e.DID, c.Operation, c.Record, c.Rev, c.RKey, e.Cursor, at}
	case KindIdentity:
		payload = identityV2{typ, e.DID, e.Identity, e.Cursor, at}
	case KindAccount:
		payload = accountV2{typ, e.Account, e.DID, e.Cursor, at}
	case KindSync:
		payload = syncV2{typ, e.DID, e.Cursor, e.Sync, at}
	default:
		return nil, fmt.Errorf("jetstream: event kind %q", e.Kind)
	}
	return jsvalue.Marshal(struct {
		Type    string `json:"$type"`
		Payload any    `json:"payload"`
	}{"message", payload})
}

// outdatedCursorFrame is the #info v2 sends before replaying a time
// cursor older than the lookback from the lookback's first event, whose
// cursor is given.
func outdatedCursorFrame(cursor int64) []byte {
	b, _ := jsvalue.Marshal(struct {
		Type    string `json:"$type"`
		Payload infoV2 `json:"payload"`
	}{"message", infoV2{NSIDv2 + "#info",
		fmt.Sprintf("requested timestamp cursor below retention floor; starting at seq %d", cursor), "OutdatedCursor"}})
	return b
}

// errorFrame ends a v2 stream: the connection closes right after it.
func errorFrame(name, message string) []byte {
	b, _ := jsvalue.Marshal(struct {
		Type    string `json:"$type"`
		Error   string `json:"error"`
		Message string `json:"message,omitempty"`
	}{"error", name, message})
	return b
}
