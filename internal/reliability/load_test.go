package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/bluesky-social/indigo/events"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/internal/chain"
	"github.com/fakepds/fakepds/internal/sockbuf"
)

// The binary under mixed load holds: 32 clients read and write over many
// accounts while three firehose consumers follow. No request answers 5xx
// (nor anything but success: every request is valid). The two consumers
// that keep up each see the whole stream, seq 1 on with no gap, every
// acknowledged commit once, each repo's chain whole, and the same stream;
// the one that reads slower than the load is cut off with ConsumerTooSlow
// after a prefix of that stream, and closed with 1008. Peak RSS and the
// -wal files' sizes are logged and bounded.
//
// Nothing here is timed: the load runs its size (a number of requests; a
// soak, a duration) and on until the slow consumer is cut, however slow
// the machine. The fast consumers read each frame off the socket as it
// comes and check it apart, so their checks do not make them slow.
func TestLoadMixed(t *testing.T) {
	var (
		clients  = 32
		accounts = scale(16, 256)
		requests = scale(1000, 0) // the default run's size
		duration = soakLoad(t)    // a soak's
		dir      = t.TempDir()
		ctx      = t.Context()
		// Without the race detector: under it the server makes the
		// thousand events the slow consumer needs to fall behind in a
		// minute, and its memory is not the real one. (The crash test
		// runs it under load with the race detector.)
		p = startBinary(t, binary(t, false), dir, false, freeAddrs(t))
		c = newClient(p.URL())
	)
	samples := sample(dir, p.cmd.Process.Pid)
	// Subscribed before the first account exists, so the consumers see the
	// stream from seq 1 and check every repo's chain from its creation.
	fast := []*consumer{follow(t, p.PDS), follow(t, p.PDS)}
	var made atomic.Int64 // events the load has made: accounts and writes
	slow := slowConsumer(t, p.URL(), made.Load, fast[0].surelyCut)

	var accts []account
	for range accounts {
		a, err := c.createAccount(ctx, uniqueHandle("load"))
		if err != nil {
			t.Fatal(err)
		}
		made.Add(1)
		accts = append(accts, a)
	}
	var (
		sent     atomic.Int64
		statuses sync.Map // status -> *atomic.Int64
		wg       sync.WaitGroup
		revsMu   sync.Mutex
		revs     = map[string][]string{} // acknowledged commits by DID
	)
	count := func(status int) {
		v, _ := statuses.LoadOrStore(status, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	began := time.Now()
	more := func() bool {
		n := sent.Add(1)
		sized := n > int64(requests)
		if duration > 0 {
			sized = time.Since(began) >= duration
		}
		// On past the size until the slow consumer is surely to be cut
		// (its pace follows the load's), within a bound that turns a
		// consumer never cut into a failure rather than a hang.
		return !sized || !slow.isSure() && time.Since(began) < loadLimit
	}
	for i := range clients {
		wg.Go(func() {
			lc := &loadClient{c: c, tids: syntax.NewTIDClock(uint(i)), live: map[string][]string{}, count: count}
			for j := i % len(accts); j < len(accts); j += clients {
				lc.accts = append(lc.accts, accts[j])
			}
			for more() {
				did, rev, err := lc.step(ctx)
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				if rev != "" {
					made.Add(1)
					revsMu.Lock()
					revs[did] = append(revs[did], rev)
					revsMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	if t.Failed() {
		return
	}

	// One more write, the last event: a consumer that has it has all.
	last, err := c.createRecord(ctx, accts[0], "", post("the last"), "")
	if err != nil {
		t.Fatal(err)
	}
	revs[accts[0].DID] = append(revs[accts[0].DID], last.Commit.Rev)
	var stream []int64
	for i, f := range fast {
		got, err := f.until(accts[0].DID, last.Commit.Rev)
		if err != nil {
			t.Fatalf("consumer %d: %v", i, err)
		}
		for j, seq := range got {
			if seq != int64(j+1) {
				t.Fatalf("consumer %d: event %d has seq %d, want %d (an event lost or repeated)", i, j, seq, j+1)
			}
		}
		for did, rs := range revs {
			for _, rev := range rs {
				if n := f.commits[did+" "+rev]; n != 1 {
					t.Fatalf("consumer %d saw acknowledged commit %s of %s %d times", i, rev, did, n)
				}
			}
		}
		if i > 0 && !slices.Equal(got, stream) {
			t.Fatalf("the consumers that kept up saw different streams (%d and %d events)", len(stream), len(got))
		}
		stream = got
	}

	cut, seen, err := slow.result()
	switch {
	case errors.Is(err, errNotEnded):
		t.Fatalf("slow consumer: %v", err)
	case cut != "ConsumerTooSlow":
		t.Fatalf("the slow consumer ended after %d events with error frame %q and %v, want ConsumerTooSlow", len(seen), cut, err)
	case !websocket.IsCloseError(err, websocket.ClosePolicyViolation):
		t.Fatalf("after ConsumerTooSlow the slow consumer's connection ended with %v, want a close 1008", err)
	case len(seen) > len(stream) || !slices.Equal(seen, stream[:len(seen)]):
		t.Fatalf("the slow consumer's %d events are not the start of the stream", len(seen))
	}

	rss := status(t, p.cmd.Process.Pid, "VmHWM")
	wal, rssBySecond := samples()
	p.stop(t)
	var st []string
	total := int64(0)
	statuses.Range(func(k, v any) bool {
		st = append(st, fmt.Sprintf("%d: %d", k, v.(*atomic.Int64).Load()))
		total += v.(*atomic.Int64).Load()
		return true
	})
	sort.Strings(st)
	t.Logf("%d clients, %d accounts, %d requests in %s (%s); the consumers that kept up: %d events each; the slow one cut off with ConsumerTooSlow after %d; peak RSS %d MiB (race detector: %v), RSS at each quarter of the run %s; largest -wal: %s",
		clients, accounts, total, took.Round(time.Millisecond), strings.Join(st, ", "), len(stream), len(seen), rss>>20, raceEnabled, quarters(rssBySecond), fmtSizes(wal))
	// The bound: 256 open actor stores' bounded page caches and
	// connections (SQLite's allocations level off near 240 MiB), the Go
	// heap's bounded caches, the binary. Where under it the RSS levels off
	// depends on how much data the load has written, not on time (a busy
	// machine's 4 minutes were still below a quiet one's plateau), so the
	// curve is logged, not checked.
	rssLimit := int64(512 << 20)
	if raceEnabled {
		rssLimit *= 4 // the race detector's shadow memory
	}
	if rss > rssLimit {
		t.Errorf("peak RSS %d MiB, over %d MiB", rss>>20, rssLimit>>20)
	}

	for kind, n := range wal {
		if n > 64<<20 {
			t.Errorf("the %s -wal reached %d MiB", kind, n>>20)
		}
	}
}

// loadClient is one of the load's clients: mostly writes to its own
// records, and reads.
type loadClient struct {
	c     *client
	accts []account // its share (two clients may share one: each touches only its own records)
	tids  *syntax.TIDClock
	live  map[string][]string // the rkeys of its records, by DID
	count func(status int)
}

// step makes one request on one of its accounts and returns the DID and
// the rev of the commit it made, if it wrote. Any answer but success is an
// error: every request is valid.
func (l *loadClient) step(ctx context.Context) (string, string, error) {
	var (
		res  written
		err  error
		what string
		del  = -1
		a    = l.accts[rand.IntN(len(l.accts))]
		live = l.live[a.DID]
	)
	defer func() { l.live[a.DID] = live }()
	n := rand.IntN(100)
	if len(live) == 0 {
		n = 0
	}
	switch {
	case n < 30:
		what = "createRecord"
		rkey := l.tids.Next().String()
		if res, err = l.c.createRecord(ctx, a, rkey, post("load "+rkey), ""); err == nil {
			live = append(live, rkey)
		}
	case n < 40:
		what = "putRecord"
		rkey := live[rand.IntN(len(live))]
		res, err = l.c.putRecord(ctx, a, rkey, post("updated "+rkey))
	case n < 48:
		what = "deleteRecord"
		del = rand.IntN(len(live))
		if res, err = l.c.deleteRecord(ctx, a, live[del]); err == nil {
			live = slices.Delete(live, del, del+1)
		}
	case n < 75:
		what = "getRecord"
		err = l.c.call(ctx, "com.atproto.repo.getRecord", "", url.Values{
			"repo": {a.DID}, "collection": {"app.bsky.feed.post"}, "rkey": {live[rand.IntN(len(live))]},
		}, nil, nil)
	case n < 88:
		what = "listRecords"
		err = l.c.call(ctx, "com.atproto.repo.listRecords", "", url.Values{
			"repo": {a.DID}, "collection": {"app.bsky.feed.post"}, "limit": {"50"},
		}, nil, nil)
	case n < 94:
		what = "getLatestCommit"
		_, _, err = l.c.latestCommit(ctx, a.DID)
	case n < 98:
		what = "describeRepo"
		err = l.c.call(ctx, "com.atproto.repo.describeRepo", "", url.Values{"repo": {a.DID}}, nil, nil)
	default:
		what = "getRepo"
		_, err = l.c.getRepo(ctx, a.DID)
	}
	var xe *xrpcError
	switch {
	case err == nil:
		l.count(200)
	case errors.As(err, &xe):
		l.count(xe.Status)
		return "", "", fmt.Errorf("%s: %w", what, err)
	default:
		return "", "", fmt.Errorf("%s: %w", what, err)
	}
	return a.DID, res.Commit.Rev, nil
}

// consumer keeps up with the firehose: one goroutine reads each frame off
// the socket as it comes, into memory, and another checks them in order
// (each repo's chain, as a strict relay does), so however slow the checks
// are on a loaded machine the server sees a consumer that reads at once.
type consumer struct {
	conn *websocket.Conn
	ck   chain.Checker
	// chains: check each repo's chain (not under the race detector, where
	// indigo's checks of a thousand commits take a minute; the crash test
	// checks chains under it).
	chains bool
	q      queue
	done   chan struct{} // the checker has ended

	mu      sync.Mutex
	seqs    []int64
	commits map[string]int // "did rev" -> times seen
	err     error
}

func follow(t *testing.T, p *harness.PDS) *consumer {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), "ws"+strings.TrimPrefix(p.URL(), "http")+"/xrpc/com.atproto.sync.subscribeRepos", nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &consumer{conn: conn, ck: chain.Checker{Directory: directory(p)}, chains: !raceEnabled || soak,
		commits: map[string]int{}, done: make(chan struct{})}
	f.q.init()
	ctx, cancel := context.WithCancel(context.Background())
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			_, msg, err := conn.ReadMessage()
			f.q.push(msg, err)
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(f.done)
		err := f.check(ctx)
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
	}()
	t.Cleanup(func() { cancel(); conn.Close(); <-read; <-f.done })
	return f
}

func (f *consumer) check(ctx context.Context) error {
	var last int64
	for n := 0; ; n++ {
		msg, err := f.q.pop(ctx)
		if err != nil {
			return fmt.Errorf("after %d events: %w", n, err)
		}
		seq, commit, err := f.event(ctx, msg)
		if err != nil {
			return fmt.Errorf("event %d: %w", n, err)
		}
		if seq <= last {
			return fmt.Errorf("seq %d after %d", seq, last)
		}
		last = seq
		f.mu.Lock()
		f.seqs = append(f.seqs, seq)
		if commit != "" {
			f.commits[commit]++
		}
		f.mu.Unlock()
	}
}

// event checks one frame and returns its seq and, for a #commit, "did rev".
func (f *consumer) event(ctx context.Context, msg []byte) (int64, string, error) {
	var e events.XRPCStreamEvent
	if err := e.Deserialize(bytes.NewReader(msg)); err != nil {
		return 0, "", err
	}
	switch {
	case e.RepoCommit != nil:
		c := e.RepoCommit
		if f.chains {
			return c.Seq, c.Repo + " " + c.Rev, f.ck.Commit(ctx, c)
		}
		return c.Seq, c.Repo + " " + c.Rev, nil
	case e.RepoSync != nil:
		if f.chains {
			return e.RepoSync.Seq, "", f.ck.Sync(ctx, e.RepoSync)
		}
		return e.RepoSync.Seq, "", nil
	case e.RepoIdentity != nil, e.RepoAccount != nil:
		return e.Sequence(), "", nil
	case e.Error != nil:
		return 0, "", fmt.Errorf("error frame %s: %s", e.Error.Error, e.Error.Message)
	}
	return 0, "", fmt.Errorf("unexpected frame %+v", e)
}

// until waits (a minute at most: a hang guard) for the #commit of did at
// rev to be checked, and returns every seq checked.
func (f *consumer) until(did, rev string) ([]int64, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		f.mu.Lock()
		seen, err, n := f.commits[did+" "+rev] > 0, f.err, len(f.seqs)
		f.mu.Unlock()
		switch {
		case err != nil:
			return nil, err
		case seen:
			f.mu.Lock()
			defer f.mu.Unlock()
			return slices.Clone(f.seqs), nil
		case time.Now().After(deadline):
			return nil, fmt.Errorf("no commit %s of %s in a minute, after %d events", rev, did, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Past these the server surely cuts a consumer: it is cut once more than
// maxBacklog events behind what the server has handed its socket, and the
// socket holds at most kernelHolds bytes (the server's send buffer, 2 x
// 128 KiB as Linux counts it, and the slow consumer's receive buffer, 2 x
// 8 KiB, with room to spare).
const (
	maxBacklog  = 500
	kernelHolds = 512 << 10
)

// surelyCut reports whether a consumer that has read every frame up to
// seq is surely past the server's bound: by the frames this consumer has
// read (the stream from seq 1, with no gap), more than maxBacklog of them
// lie beyond what the socket could hold after seq.
func (f *consumer) surelyCut(seq int64) bool {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	held, last := 0, seq
	for last < int64(len(f.q.sizes)) && held+f.q.sizes[last] <= kernelHolds {
		held += f.q.sizes[last]
		last++
	}
	return int64(len(f.q.sizes))-last > maxBacklog
}

// queue is an unbounded FIFO of frames, ended by the reader's error.
type queue struct {
	mu     sync.Mutex
	frames [][]byte
	sizes  []int // of every frame pushed
	err    error
	more   chan struct{} // has room for one wake-up
}

func (q *queue) init() { q.more = make(chan struct{}, 1) }

func (q *queue) push(msg []byte, err error) {
	q.mu.Lock()
	if err != nil {
		q.err = err
	} else {
		q.frames = append(q.frames, msg)
		q.sizes = append(q.sizes, len(msg))
	}
	q.mu.Unlock()
	select {
	case q.more <- struct{}{}:
	default:
	}
}

func (q *queue) pop(ctx context.Context) ([]byte, error) {
	for {
		q.mu.Lock()
		if len(q.frames) > 0 {
			msg := q.frames[0]
			q.frames[0] = nil
			q.frames = q.frames[1:]
			q.mu.Unlock()
			return msg, nil
		}
		err := q.err
		q.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-q.more:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// slow is a consumer slower than the load: it reads its i-th frame once
// the load has made 8i events (accounts and writes), or 30 ms after the
// one before, whichever is first, through an 8 KiB receive buffer. It
// falls behind by seven eighths of the load, and is never so slow that
// the server's blocked write (which wakes once a third of the socket's
// 128 KiB send buffer has gone) waits anywhere near its 10 s write
// timeout: the backlog, not the timeout, must end it. Once it is surely
// past the server's bound (sure), it reads at full speed: the server's
// next write finds the backlog and sends the error frame.
type slow struct {
	progress func() int64
	sure     func(seq int64) bool
	sured    chan struct{} // closed once sure
	cut      chan struct{} // closed at the error frame
	done     chan struct{}
	// Written by the reader until done is closed.
	seqs  []int64
	error string // the error frame's name
	err   error
}

const loadLimit = 5 * time.Minute

var errNotEnded = errors.New("the connection did not end within a minute of the load's end")

func slowConsumer(t *testing.T, base string, progress func() int64, sure func(seq int64) bool) *slow {
	t.Helper()
	d := websocket.Dialer{NetDialContext: sockbuf.Dialer(8 << 10).DialContext}
	conn, _, err := d.DialContext(t.Context(), "ws"+strings.TrimPrefix(base, "http")+"/xrpc/com.atproto.sync.subscribeRepos", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &slow{progress: progress, sure: sure, sured: make(chan struct{}), cut: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { conn.Close(); <-s.done })
	go func() {
		defer close(s.done)
		for i := int64(1); ; i++ {
			if !s.isSure() {
				s.pace(i)
			}
			_, msg, err := conn.ReadMessage()
			if err != nil {
				s.err = err
				return
			}
			var e events.XRPCStreamEvent
			if err := e.Deserialize(bytes.NewReader(msg)); err != nil {
				s.err = err
				return
			}
			if e.Error != nil {
				s.error = e.Error.Error
				close(s.cut)
				continue // read on to the close
			}
			s.seqs = append(s.seqs, e.Sequence())
		}
	}()
	return s
}

// pace waits until the load has made 8i events, 30 ms at most, or until
// the consumer is surely past the server's bound.
func (s *slow) pace(i int64) {
	var seq int64
	if n := len(s.seqs); n > 0 {
		seq = s.seqs[n-1]
	}
	for deadline := time.Now().Add(30 * time.Millisecond); s.progress() < 8*i && time.Now().Before(deadline); {
		if s.sure(seq) {
			close(s.sured)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// isSure reports whether the consumer is surely past the server's bound
// (or has been cut).
func (s *slow) isSure() bool {
	select {
	case <-s.sured:
		return true
	default:
		return s.isCut()
	}
}

// isCut reports whether the consumer has read its error frame or its
// connection has ended.
func (s *slow) isCut() bool {
	select {
	case <-s.cut:
		return true
	case <-s.done:
		return true
	default:
		return false
	}
}

// result waits for the slow consumer's connection to end and returns the
// error frame's name, the seqs it read before and how the connection ended.
func (s *slow) result() (string, []int64, error) {
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		return "", nil, errNotEnded
	}
	return s.error, s.seqs, s.err
}

func fmtSizes(m map[string]int64) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s %.1f MiB", k, float64(v)/(1<<20)))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// status is a /proc/PID/status field given in kB (VmHWM, VmRSS), in bytes.
func status(t testing.TB, pid int, field string) int64 {
	t.Helper()
	n, err := readStatus(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// quarters formats the samples at each quarter of the run, in MiB.
func quarters(rss []int64) string {
	if len(rss) == 0 {
		return "(none)"
	}
	var out []string
	for q := 1; q <= 4; q++ {
		out = append(out, strconv.FormatInt(rss[(len(rss)-1)*q/4]>>20, 10))
	}
	return strings.Join(out, ", ") + " MiB"
}

// sample watches the -wal files under dir and the process pid until stop
// is called, then returns the largest size seen of each -wal ("account",
// "sequencer", "plc" and "actor", the largest of any actor store) and the
// process's RSS once a second: a WAL that checkpoints stays near its
// auto-checkpoint size (1,000 pages), and an RSS that levels off is
// bounded where a peak alone could not say.
func sample(dir string, pid int) (stop func() (map[string]int64, []int64)) {
	max := map[string]int64{}
	var rss []int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(path, "-wal") {
					return nil
				}
				info, err := d.Info()
				if err != nil {
					return nil // removed since the listing
				}
				kind := strings.TrimSuffix(filepath.Base(path), ".sqlite-wal")
				if strings.Contains(path, string(filepath.Separator)+"actors"+string(filepath.Separator)) {
					kind = "actor"
				}
				if info.Size() > max[kind] {
					max[kind] = info.Size()
				}
				return nil
			})
			if n%10 == 0 {
				if v, err := readStatus(pid, "VmRSS"); err == nil {
					rss = append(rss, v)
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() (map[string]int64, []int64) {
		close(done)
		wg.Wait()
		return max, rss
	}
}
