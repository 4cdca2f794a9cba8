package harness_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/fixtures"
	"github.com/fakepds/fakepds/harness"
)

// seededRun is what a seeded workload leaves: what a golden file would
// hold.
type seededRun struct {
	DIDs    []string
	Handles []string
	CARs    [][]byte // getRepo of each account
	Frames  [][]byte // the firehose from cursor 0, each frame as sent
}

// seedChildVar names the seed and the output file of a child test binary
// that runs TestSeededWorkload.
const seedChildVar = "FAKEPDS_SEEDED_WORKLOAD"

// Issue 15.2: the same seed and the same workload, in two processes, make
// byte-identical repos and firehose frames; another seed other DIDs.
func TestSeedReproducesRepoAndFirehose(t *testing.T) {
	if os.Getenv(seedChildVar) != "" {
		t.Skip("in the child")
	}
	t.Parallel()
	a, b, other := runSeeded(t, 1), runSeeded(t, 1), runSeeded(t, 2)
	if len(a.Frames) < 30 || len(a.CARs) != 2 {
		t.Fatalf("the workload left %d frames and %d CARs", len(a.Frames), len(a.CARs))
	}
	same := func(what string, x, y [][]byte) {
		t.Helper()
		if len(x) != len(y) {
			t.Fatalf("%s: %d and %d", what, len(x), len(y))
		}
		var differ []int
		for i := range x {
			if !bytes.Equal(x[i], y[i]) {
				differ = append(differ, i)
			}
		}
		if len(differ) > 0 {
			i := differ[0]
			at := 0
			for at < min(len(x[i]), len(y[i])) && x[i][at] == y[i][at] {
				at++
			}
			t.Errorf("%d of %d %ss differ between two runs of seed 1; the first, %d, at byte %d of %d and %d", len(differ), len(x), what, i, at, len(x[i]), len(y[i]))
		}
	}
	if strings.Join(a.DIDs, " ") != strings.Join(b.DIDs, " ") || strings.Join(a.Handles, " ") != strings.Join(b.Handles, " ") {
		t.Errorf("seed 1 made %v %v, then %v %v", a.DIDs, a.Handles, b.DIDs, b.Handles)
	}
	same("getRepo CAR", a.CARs, b.CARs)
	same("firehose frame", a.Frames, b.Frames)
	for i := range a.DIDs {
		if a.DIDs[i] == other.DIDs[i] || a.Handles[i] == other.Handles[i] {
			t.Errorf("seeds 1 and 2 both made %s (%s)", a.DIDs[i], a.Handles[i])
		}
	}
}

// runSeeded runs TestSeededWorkload with seed in a new process and reads
// what it wrote.
func runSeeded(t *testing.T, seed uint64) seededRun {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSeededWorkload$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s", seedChildVar, seed, out))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("seeded workload %d: %v\n%s", seed, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r seededRun
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSeededWorkload is the child of TestSeedReproducesRepoAndFirehose:
// a workload of a fixture, accounts, writes, a blob, a handle change and
// deletes on a seeded PDS.
func TestSeededWorkload(t *testing.T) {
	seedStr, out, ok := strings.Cut(os.Getenv(seedChildVar), ",")
	if !ok {
		t.Skip("run by TestSeedReproducesRepoAndFirehose")
	}
	seed, err := strconv.ParseUint(seedStr, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The social fixture's five accounts and their records come first.
	p := harness.New(t, harness.WithSeed(seed), harness.WithFixture(fixtures.Social()))
	alice := p.NewAccount(t, harness.WithHandlePrefix("alice"))
	bob := p.NewAccount(t, harness.WithHandlePrefix("bob"))
	hello := alice.Post(t, "hello")
	bob.Follow(t, alice.DID)
	like := bob.Like(t, hello)
	img := alice.UploadBlob(t, []byte("\x89PNG\r\n\x1a\nnot really"), "image/png")
	alice.Post(t, "a picture", harness.WithImages(img))
	bob.SetProfile(t, "Bob", "")
	p.Clock(t).Advance(time.Hour)
	bob.Unlike(t, like)
	alice.DeletePost(t, hello)
	alice.SetHandle(t, strings.Replace(alice.Handle.String(), "alice", "carol", 1))

	var run seededRun
	for _, a := range []*harness.Account{alice, bob} {
		car, err := comatproto.SyncGetRepo(t.Context(), p.Client(), a.DID.String(), "")
		if err != nil {
			t.Fatal(err)
		}
		run.DIDs, run.Handles, run.CARs = append(run.DIDs, a.DID.String()), append(run.Handles, a.Handle.String()), append(run.CARs, car)
	}
	run.Frames = firehoseFrames(t, p)
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// firehoseFrames reads every frame of p's firehose from cursor 0, as sent.
func firehoseFrames(t *testing.T, p *harness.PDS) [][]byte {
	t.Helper()
	head := p.Seq(t)
	u := "ws" + strings.TrimPrefix(p.URL(), "http") + "/xrpc/com.atproto.sync.subscribeRepos?cursor=0"
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var frames [][]byte
	for int64(len(frames)) < head {
		_, b, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("frame %d of %d: %v", len(frames)+1, head, err)
		}
		frames = append(frames, b)
	}
	return frames
}

// A seeded PDS on a free port names SeededPublicURL in its DID documents
// (the port would change the DIDs), and its clock stands at SeedEpoch
// until the test moves it.
func TestSeededPDSURLAndClock(t *testing.T) {
	t.Parallel()
	p := harness.New(t, harness.WithSeed(3))
	a := p.NewAccount(t)
	ident, err := p.Directory().LookupDID(t.Context(), a.DID)
	if err != nil {
		t.Fatal(err)
	}
	if got := ident.PDSEndpoint(); got != harness.SeededPublicURL {
		t.Errorf("DID document names %q, want %q", got, harness.SeededPublicURL)
	}
	c := p.Clock(t)
	if now := c.Now(); !now.Equal(harness.SeedEpoch) {
		t.Errorf("clock at %v, want %v", now, harness.SeedEpoch)
	}
	post := a.Post(t, "at the epoch")
	if v := p.RequireRecord(t, post.URI); v["createdAt"] != "2025-01-01T00:00:00Z" {
		t.Errorf("createdAt %v", v["createdAt"])
	}
	c.Advance(time.Minute)
	if now := c.Now(); !now.Equal(harness.SeedEpoch.Add(time.Minute)) {
		t.Errorf("clock at %v after Advance(1m)", now)
	}
}
