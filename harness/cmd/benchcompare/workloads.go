package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/events"
	"github.com/gorilla/websocket"
)

// The operations of the suite-shaped workload and the hot loop, in the
// order they run.
var operations = []string{
	"createAccount", "createSession", "createRecord", "putRecord", "deleteRecord",
	"applyWrites", "getRecord", "listRecords", "uploadBlob", "getRepo",
}

// nsids are the methods the operations call, for fakepds's own stats.
var nsids = map[string]string{
	"createAccount": "com.atproto.server.createAccount",
	"createSession": "com.atproto.server.createSession",
	"createRecord":  "com.atproto.repo.createRecord",
	"putRecord":     "com.atproto.repo.putRecord",
	"deleteRecord":  "com.atproto.repo.deleteRecord",
	"applyWrites":   "com.atproto.repo.applyWrites",
	"getRecord":     "com.atproto.repo.getRecord",
	"listRecords":   "com.atproto.repo.listRecords",
	"uploadBlob":    "com.atproto.repo.uploadBlob",
	"getRepo":       "com.atproto.sync.getRepo",
}

const (
	collection  = "app.bsky.feed.post"
	repoRecords = 100 // what getRepo and listRecords read
	blobSize    = 4 << 10
	listLimit   = 50
)

// samples are call durations by operation.
type samples map[string][]time.Duration

func (s samples) add(op string, d time.Duration) { s[op] = append(s[op], d) }

// target is one server a workload runs against.
type target struct {
	base   string
	tr     *http.Transport
	record func(nsid, contentType string, body []byte)
	prefix string // makes handles unique on this server
	next   int
}

func newTarget(base string, record func(nsid, contentType string, body []byte)) *target {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return &target{base: base, tr: newTransport(), record: record, prefix: hex.EncodeToString(b[:])}
}

func (t *target) close() { t.tr.CloseIdleConnections() }

type account struct {
	handle, password, did string
	c                     *client
}

func (t *target) client() *client {
	c := newClient(t.base, t.tr)
	c.record = t.record
	return c
}

// createAccount makes a new account, its client logged in.
func (t *target) createAccount() (*account, time.Duration, error) {
	t.next++
	// dev-env's handles are 3-18 characters before .test.
	a := &account{handle: fmt.Sprintf("b%s%d.test", t.prefix, t.next), password: "bench-" + t.prefix, c: t.client()}
	var out struct {
		DID       string `json:"did"`
		AccessJwt string `json:"accessJwt"`
	}
	d, err := a.c.decode(http.MethodPost, "com.atproto.server.createAccount", nil, map[string]string{
		"handle": a.handle, "email": strings.TrimSuffix(a.handle, ".test") + "@example.com", "password": a.password,
	}, &out)
	if err != nil {
		return nil, 0, err
	}
	a.did, a.c.token = out.DID, out.AccessJwt
	return a, d, nil
}

func post(text string) map[string]any {
	return map[string]any{"$type": collection, "text": text, "createdAt": time.Now().UTC().Format("2006-01-02T15:04:05.000Z")}
}

func rkeyOf(uri string) string { return uri[strings.LastIndexByte(uri, '/')+1:] }

func (a *account) createSession() (time.Duration, error) {
	c := &client{base: a.c.base, hc: a.c.hc, record: a.c.record} // no token: a login
	return c.decode(http.MethodPost, "com.atproto.server.createSession", nil, map[string]string{"identifier": a.handle, "password": a.password}, nil)
}

func (a *account) createRecord() (string, time.Duration, error) {
	var out struct {
		URI string `json:"uri"`
	}
	d, err := a.c.decode(http.MethodPost, "com.atproto.repo.createRecord", nil, map[string]any{"repo": a.did, "collection": collection, "record": post("hello")}, &out)
	return rkeyOf(out.URI), d, err
}

// putRecord replaces rkey's record with text: a text of its own per call,
// as a put of the record's current value is a no-op on both servers (no
// commit), which a hot loop of puts within one millisecond (createdAt's
// resolution) measured half the time.
func (a *account) putRecord(rkey, text string) (time.Duration, error) {
	return a.c.decode(http.MethodPost, "com.atproto.repo.putRecord", nil, map[string]any{"repo": a.did, "collection": collection, "rkey": rkey, "record": post(text)}, nil)
}

func (a *account) deleteRecord(rkey string) (time.Duration, error) {
	return a.c.decode(http.MethodPost, "com.atproto.repo.deleteRecord", nil, map[string]any{"repo": a.did, "collection": collection, "rkey": rkey}, nil)
}

// applyWrites creates n posts in one commit and returns their rkeys.
func (a *account) applyWrites(n int) ([]string, time.Duration, error) {
	writes := make([]map[string]any, n)
	for i := range writes {
		writes[i] = map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": collection, "value": post(fmt.Sprintf("post %d", i))}
	}
	var out struct {
		Results []struct {
			URI string `json:"uri"`
		} `json:"results"`
	}
	d, err := a.c.decode(http.MethodPost, "com.atproto.repo.applyWrites", nil, map[string]any{"repo": a.did, "writes": writes}, &out)
	if err != nil {
		return nil, 0, err
	}
	rkeys := make([]string, len(out.Results))
	for i, r := range out.Results {
		rkeys[i] = rkeyOf(r.URI)
	}
	return rkeys, d, nil
}

// fill brings the repo up by n records, 200 a commit (the reference's
// limit), unmeasured and unrecorded (the floor replays measured calls).
func (a *account) fill(n int) error {
	rec := a.c.record
	a.c.record = nil
	defer func() { a.c.record = rec }()
	for n > 0 {
		k := min(n, 200)
		if _, _, err := a.applyWrites(k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func (a *account) getRecord(rkey string) (time.Duration, error) {
	_, d, err := a.c.call(http.MethodGet, "com.atproto.repo.getRecord", url.Values{"repo": {a.did}, "collection": {collection}, "rkey": {rkey}}, nil, "")
	return d, err
}

func (a *account) listRecords() (time.Duration, error) {
	_, d, err := a.c.call(http.MethodGet, "com.atproto.repo.listRecords", url.Values{"repo": {a.did}, "collection": {collection}, "limit": {fmt.Sprint(listLimit)}}, nil, "")
	return d, err
}

func (a *account) uploadBlob() (time.Duration, error) {
	b := make([]byte, blobSize)
	_, _ = rand.Read(b)
	_, d, err := a.c.call(http.MethodPost, "com.atproto.repo.uploadBlob", nil, b, "application/octet-stream")
	return d, err
}

func (a *account) getRepo() (time.Duration, error) {
	_, d, err := a.c.call(http.MethodGet, "com.atproto.sync.getRepo", url.Values{"did": {a.did}}, nil, "")
	return d, err
}

// each runs fn for every account and adds its durations to op.
func each(s samples, op string, accts []*account, fn func(i int, a *account) (time.Duration, error)) error {
	for i, a := range accts {
		d, err := fn(i, a)
		if err != nil {
			return fmt.Errorf("%s (account %d): %w", op, i, err)
		}
		s.add(op, d)
	}
	return nil
}

// suiteShaped is workload (a): n accounts, each operation once per
// account, operation after operation, so that every call lands on a
// different account than the one before, as in a test suite. Between the
// writes and the reads it fills each repo up to repoRecords records
// (unmeasured, with applyWrites), calling beforeFill (if not nil) first,
// so that the server's stats of applyWrites can be read without the fill.
func suiteShaped(t *target, n int, beforeFill func() error) (samples, error) {
	s := samples{}
	accts := make([]*account, n)
	for i := range accts {
		a, d, err := t.createAccount()
		if err != nil {
			return nil, fmt.Errorf("createAccount (account %d): %w", i, err)
		}
		accts[i] = a
		s.add("createAccount", d)
	}
	rkeys := make([]string, n)
	three := make([][]string, n)
	steps := []struct {
		op string
		fn func(i int, a *account) (time.Duration, error)
	}{
		{"createSession", func(_ int, a *account) (time.Duration, error) { return a.createSession() }},
		{"createRecord", func(i int, a *account) (d time.Duration, err error) {
			rkeys[i], d, err = a.createRecord()
			return d, err
		}},
		{"putRecord", func(i int, a *account) (time.Duration, error) { return a.putRecord(rkeys[i], "edited") }},
		{"deleteRecord", func(i int, a *account) (time.Duration, error) { return a.deleteRecord(rkeys[i]) }},
		{"applyWrites", func(i int, a *account) (d time.Duration, err error) {
			three[i], d, err = a.applyWrites(3)
			return d, err
		}},
		{"", func(_ int, a *account) (time.Duration, error) { return 0, a.fill(repoRecords - 3) }},
		{"getRecord", func(i int, a *account) (time.Duration, error) { return a.getRecord(three[i][0]) }},
		{"listRecords", func(_ int, a *account) (time.Duration, error) { return a.listRecords() }},
		{"uploadBlob", func(_ int, a *account) (time.Duration, error) { return a.uploadBlob() }},
		{"getRepo", func(_ int, a *account) (time.Duration, error) { return a.getRepo() }},
	}
	for _, st := range steps {
		if st.op == "" { // setup, not measured
			if beforeFill != nil {
				if err := beforeFill(); err != nil {
					return nil, err
				}
			}
			if err := each(samples{}, "fill", accts, st.fn); err != nil {
				return nil, err
			}
			continue
		}
		if err := each(s, st.op, accts, st.fn); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// hotLoop is workload (b), what the repo's Go benchmarks measure: each
// operation k times back to back on one account (createSession at most
// sessions times: the reference pads every login to 350 ms). Reads go to
// a second account that holds repoRecords records, so that they read
// what the suite-shaped workload reads. ready (if not nil) is called once
// that setup is done, before the first measured call.
func hotLoop(t *target, k, sessions int, ready func() error) (samples, error) {
	s := samples{}
	w, _, err := t.createAccount()
	if err != nil {
		return nil, err
	}
	r, _, err := t.createAccount()
	if err != nil {
		return nil, err
	}
	if err := r.fill(repoRecords - 1); err != nil {
		return nil, err
	}
	readKey, _, err := r.createRecord()
	if err != nil {
		return nil, err
	}
	if ready != nil {
		if err := ready(); err != nil {
			return nil, err
		}
	}
	repeat := func(op string, n int, fn func(i int) (time.Duration, error)) error {
		for i := range n {
			d, err := fn(i)
			if err != nil {
				return fmt.Errorf("%s %d: %w", op, i, err)
			}
			s.add(op, d)
		}
		return nil
	}
	rkeys := make([]string, k)
	steps := []struct {
		op string
		n  int
		fn func(i int) (time.Duration, error)
	}{
		{"createAccount", k, func(int) (time.Duration, error) {
			_, d, err := t.createAccount()
			return d, err
		}},
		{"createSession", min(k, sessions), func(int) (time.Duration, error) { return w.createSession() }},
		{"createRecord", k, func(i int) (d time.Duration, err error) {
			rkeys[i], d, err = w.createRecord()
			return d, err
		}},
		{"putRecord", k, func(i int) (time.Duration, error) { return w.putRecord(rkeys[0], fmt.Sprintf("edited %d", i)) }},
		{"deleteRecord", k, func(i int) (time.Duration, error) { return w.deleteRecord(rkeys[i]) }},
		{"applyWrites", k, func(int) (time.Duration, error) {
			_, d, err := w.applyWrites(3)
			return d, err
		}},
		{"getRecord", k, func(int) (time.Duration, error) { return r.getRecord(readKey) }},
		{"listRecords", k, func(int) (time.Duration, error) { return r.listRecords() }},
		{"uploadBlob", k, func(int) (time.Duration, error) { return w.uploadBlob() }},
		{"getRepo", k, func(int) (time.Duration, error) { return r.getRepo() }},
	}
	for _, st := range steps {
		if err := repeat(st.op, st.n, st.fn); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// concurrent is workload (c): writers clients, each creating records in
// its own repo as fast as it can for d. It returns every write's duration.
func concurrent(t *target, writers int, d time.Duration) ([]time.Duration, error) {
	accts := make([]*account, writers)
	for i := range accts {
		a, _, err := t.createAccount()
		if err != nil {
			return nil, err
		}
		accts[i] = a
	}
	var (
		mu   sync.Mutex
		all  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for _, a := range accts {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) {
				_, dd, err := a.createRecord()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mine = append(mine, dd)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, errors.Join(errs...)
}

// frameTimes are workload (e)'s figures for one write: from sending it
// to its #commit frame at a subscriber, and from its response to the
// frame (negative when the frame came first).
type frameTimes struct{ fromSend, afterResponse time.Duration }

// idleToFrame is workload (e): a subscriber on subscribeRepos; reps
// times, the server idles for idle, then one createRecord, timed to its
// #commit frame.
func idleToFrame(t *target, reps int, idle time.Duration) ([]frameTimes, error) {
	a, _, err := t.createAccount()
	if err != nil {
		return nil, err
	}
	ws := "ws" + strings.TrimPrefix(t.base, "http") + "/xrpc/com.atproto.sync.subscribeRepos"
	conn, _, err := websocket.DefaultDialer.Dial(ws, nil)
	if err != nil {
		return nil, fmt.Errorf("subscribeRepos: %w", err)
	}
	defer conn.Close()
	var (
		mu      sync.Mutex
		arrived = map[string]time.Time{} // "did/collection/rkey" -> when its frame came
		readErr error
	)
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			at := time.Now()
			if err != nil {
				mu.Lock()
				readErr = err
				mu.Unlock()
				return
			}
			r := bytes.NewReader(msg)
			var h events.EventHeader
			if err := h.UnmarshalCBOR(r); err != nil || h.MsgType != "#commit" {
				continue
			}
			var c comatproto.SyncSubscribeRepos_Commit
			if err := c.UnmarshalCBOR(r); err != nil {
				continue
			}
			mu.Lock()
			for _, op := range c.Ops {
				arrived[c.Repo+"/"+op.Path] = at
			}
			mu.Unlock()
		}
	}()
	var out []frameTimes
	for i := range reps {
		time.Sleep(idle)
		sent := time.Now()
		rkey, _, err := a.createRecord()
		if err != nil {
			return nil, err
		}
		answered := time.Now()
		key := a.did + "/" + collection + "/" + rkey
		var at time.Time
		for wait := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Microsecond) {
			mu.Lock()
			at = arrived[key]
			rerr := readErr
			mu.Unlock()
			if !at.IsZero() {
				break
			}
			if rerr != nil {
				return nil, fmt.Errorf("subscribeRepos: %w", rerr)
			}
			if time.Now().After(wait) {
				return nil, fmt.Errorf("write %d: no #commit frame for %s within 10 s", i, key)
			}
		}
		out = append(out, frameTimes{at.Sub(sent), at.Sub(answered)})
	}
	return out, nil
}

// populate makes accounts accounts of records records each (unmeasured):
// workload (g)'s large PDS and the growth points.
func populate(t *target, accounts, records int) error {
	for i := range accounts {
		a, _, err := t.createAccount()
		if err != nil {
			return fmt.Errorf("account %d: %w", i, err)
		}
		if err := a.fill(records); err != nil {
			return fmt.Errorf("account %d: %w", i, err)
		}
	}
	return nil
}
