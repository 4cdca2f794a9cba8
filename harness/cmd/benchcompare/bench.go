package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/fakepds/fakepds/pds/stats"
)

// perTarget is everything measured on one kind of server, over rounds.
type perTarget struct {
	suite, hot             samples // pooled over rounds
	suiteRounds, hotRounds []samples
	// serverSuite and serverHot are fakepds's own stats, one per round.
	serverSuite, serverHot []map[string]stats.Method
	writesPerSec           []float64
	writeLatency           []time.Duration
	frames                 []frameTimes
	starts                 []time.Duration
	ready, after           []memory
	conformance            []time.Duration // the scenarios summed, one per round
	scenarios              int
}

type results struct {
	by         map[string]*perTarget // fakepds, reference, floor
	harnessNew time.Duration
	big        *memory
	bigSize    string
	growRepo   []growthPoint
	growPDS    []growthPoint
}

func newResults() *results { return &results{by: map[string]*perTarget{}} }

func (r *results) get(name string) *perTarget {
	p := r.by[name]
	if p == nil {
		p = &perTarget{suite: samples{}, hot: samples{}}
		r.by[name] = p
	}
	return p
}

type bench struct {
	o        *options
	tmp      string
	progress io.Writer
	res      *results
	floor    *floor

	fakepdsArgv []string
	// selfServe: fakepds is this binary serving pds.Server (serveEnv).
	selfServe             bool
	referenceArgv         []string
	conformanceBin        string
	loadBefore, loadAfter string
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.progress, "benchcompare %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// serveEnv makes this binary serve fakepds in-process instead (its value:
// the CPU profile's path, or "none"), for -cpuprofile and the tests.
const serveEnv = "BENCHCOMPARE_SERVE"

// prepare builds what the run needs: the fakepds binary, the conformance
// test binary, the floor server.
func (b *bench) prepare(ctx context.Context) error {
	b.loadBefore = loadAverage()
	if b.o.has("suite") || b.o.has("hot") {
		b.floor = &floor{}
	}
	switch {
	case b.o.cpuprofile != "" || b.o.fakepds == "self":
		self, err := os.Executable()
		if err != nil {
			return err
		}
		b.fakepdsArgv, b.selfServe = []string{self}, true
	case b.o.fakepds != "":
		b.fakepdsArgv = []string{b.o.fakepds, "serve", "--addr", "127.0.0.1:0"}
	case b.wants("fakepds") && (b.perRound() || b.o.big || b.o.growth):
		bin := filepath.Join(b.tmp, "fakepds")
		b.logf("building fakepds from %s", b.o.root)
		if err := b.goCmd(ctx, "build", "-o", bin, "./harness/cmd/fakepds"); err != nil {
			return err
		}
		b.fakepdsArgv = []string{bin, "serve", "--addr", "127.0.0.1:0"}
	}
	if b.wants("reference") {
		script := b.o.reference
		if script == "" {
			script = filepath.Join(b.o.root, "scripts", "reference-pds", "run.sh")
		}
		b.referenceArgv = []string{script}
	}
	if b.o.has("conformance") {
		b.conformanceBin = filepath.Join(b.tmp, "conformance.test")
		b.logf("building the conformance tests")
		if err := b.goCmd(ctx, "test", "-c", "-o", b.conformanceBin, "./harness/conformance"); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) wants(target string) bool { return slices.Contains(b.o.targets, target) }

func (b *bench) goCmd(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = b.o.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// start starts a fresh server of one kind for round (0: outside the
// rounds, -big and -growth, which are not profiled).
func (b *bench) start(ctx context.Context, name string, round int) (*server, error) {
	if name == "reference" {
		return startServer(ctx, name, b.referenceArgv, nil, b.tmp)
	}
	var extra []string
	if b.selfServe {
		profile := "none"
		switch {
		case b.o.cpuprofile == "" || round == 0:
		case round == 1:
			profile = b.o.cpuprofile
		default:
			profile = fmt.Sprintf("%s.%d", b.o.cpuprofile, round)
		}
		extra = []string{serveEnv + "=" + profile}
	}
	return startServer(ctx, name, b.fakepdsArgv, extra, b.tmp)
}

// perRound says whether a workload that runs in every round was asked for.
func (b *bench) perRound() bool {
	return b.o.has("suite") || b.o.has("hot") || b.o.has("concurrent") || b.o.has("idle") || b.o.has("start") || b.o.has("rss")
}

// run runs the rounds, then what is measured once.
func (b *bench) run(ctx context.Context) error {
	for r := 1; r <= b.o.rounds && b.perRound(); r++ {
		for i, name := range b.o.targets {
			// The floor replays fakepds's answers (the reference's without it).
			replayed := name == "fakepds" || (i == 0 && !b.wants("fakepds"))
			if err := b.round(ctx, name, r, replayed); err != nil {
				return fmt.Errorf("round %d, %s: %w", r, name, err)
			}
		}
		if err := b.floorRound(ctx); err != nil {
			return fmt.Errorf("round %d, floor: %w", r, err)
		}
	}
	if b.o.has("conformance") {
		for r := 1; r <= b.o.rounds; r++ {
			for _, name := range b.o.targets {
				if err := b.conformance(ctx, name); err != nil {
					return fmt.Errorf("conformance round %d, %s: %w", r, name, err)
				}
			}
		}
	}
	if b.o.has("start") && b.o.benchHarness {
		b.logf("harness BenchmarkNew")
		d, err := b.benchmarkNew(ctx)
		if err != nil {
			return err
		}
		b.res.harnessNew = d
	}
	if b.o.big && b.wants("fakepds") {
		if err := b.bigRun(ctx); err != nil {
			return fmt.Errorf("-big: %w", err)
		}
	}
	if b.o.growth && b.wants("fakepds") {
		if err := b.growthRun(ctx); err != nil {
			return fmt.Errorf("-growth: %w", err)
		}
	}
	b.loadAfter = loadAverage()
	return nil
}

// round starts a fresh server and runs the per-round workloads on it;
// replayed says its answers are the ones the floor replays.
func (b *bench) round(ctx context.Context, name string, round int, replayed bool) (err error) {
	b.logf("round %d: starting %s", round, name)
	srv, err := b.start(ctx, name, round)
	if err != nil {
		return err
	}
	defer func() {
		if serr := srv.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	p := b.res.get(name)
	p.starts = append(p.starts, srv.started)
	mem, err := srv.memory()
	if err != nil {
		return err
	}
	p.ready = append(p.ready, mem)
	var record func(string, string, []byte)
	if replayed && b.floor != nil {
		record = b.floor.keep
	}
	t := newTarget(srv.url, record)
	defer t.close()
	fakepds := name == "fakepds"
	measured := func(what string, fn func() error) error {
		if fakepds {
			if err := srv.resetStats(); err != nil {
				return err
			}
		}
		b.logf("round %d: %s: %s", round, name, what)
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w (%v)", what, err, srv.tail())
		}
		return nil
	}
	if (b.o.has("suite") || b.o.has("hot")) && b.o.warmup > 0 {
		if err := measured("warm-up", func() error { _, err := suiteShaped(t, b.o.warmup, nil); return err }); err != nil {
			return err
		}
	}
	serverStats := func(dst *[]map[string]stats.Method) error {
		if !fakepds {
			return nil
		}
		st, err := srv.serverStats()
		*dst = append(*dst, st)
		return err
	}
	var resetStats func() error
	if fakepds {
		resetStats = srv.resetStats
	}
	if b.o.has("suite") {
		if err := measured("suite-shaped", func() error {
			if !fakepds {
				s, err := suiteShaped(t, b.o.n, nil)
				p.suiteRounds = append(p.suiteRounds, s)
				merge(p.suite, s)
				return err
			}
			s, st, err := suiteWithStats(srv, t, b.o.n)
			p.suiteRounds = append(p.suiteRounds, s)
			p.serverSuite = append(p.serverSuite, st)
			merge(p.suite, s)
			return err
		}); err != nil {
			return err
		}
	}
	if b.o.has("hot") {
		if err := measured("hot loop", func() error {
			s, err := hotLoop(t, b.o.hot, b.o.sessions, resetStats)
			if err != nil {
				return err
			}
			p.hotRounds = append(p.hotRounds, s)
			merge(p.hot, s)
			return serverStats(&p.serverHot)
		}); err != nil {
			return err
		}
	}
	if b.o.has("concurrent") {
		if err := measured(fmt.Sprintf("%d concurrent writers for %s", b.o.writers, b.o.duration), func() error {
			lat, err := concurrent(t, b.o.writers, b.o.duration)
			if err != nil {
				return err
			}
			p.writesPerSec = append(p.writesPerSec, float64(len(lat))/b.o.duration.Seconds())
			p.writeLatency = append(p.writeLatency, lat...)
			return nil
		}); err != nil {
			return err
		}
	}
	if b.o.has("idle") {
		if err := measured(fmt.Sprintf("write after %s idle to its frame", b.o.idle), func() error {
			f, err := idleToFrame(t, b.o.idleReps, b.o.idle)
			p.frames = append(p.frames, f...)
			return err
		}); err != nil {
			return err
		}
	}
	mem, err = srv.memory()
	if err != nil {
		return err
	}
	p.after = append(p.after, mem)
	return nil
}

// suiteWithStats runs the suite-shaped workload on fakepds (its stats
// reset before) and returns fakepds's own stats of it. Those of
// applyWrites are taken before the fill, whose applyWrites calls would
// count too.
func suiteWithStats(srv *server, t *target, n int) (samples, map[string]stats.Method, error) {
	if err := srv.resetStats(); err != nil {
		return nil, nil, err
	}
	var applyWrites stats.Method
	s, err := suiteShaped(t, n, func() error {
		st, err := srv.serverStats()
		applyWrites = st[nsids["applyWrites"]]
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	st, err := srv.serverStats()
	if err != nil {
		return nil, nil, err
	}
	st[nsids["applyWrites"]] = applyWrites
	return s, st, nil
}

// floorRound runs the suite-shaped workload and the hot loop against the
// floor server, replaying what the round's first target answered.
func (b *bench) floorRound(ctx context.Context) (err error) {
	if b.floor == nil {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	srv, err := startServer(ctx, "floor", []string{self}, []string{floorEnv + "=1"}, b.tmp)
	if err != nil {
		return err
	}
	defer func() {
		if serr := srv.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := b.floor.load(srv); err != nil {
		return err
	}
	p := b.res.get("floor")
	t := newTarget(srv.url, nil)
	defer t.close()
	b.logf("floor")
	if b.o.has("suite") {
		s, err := suiteShaped(t, b.o.n, nil)
		if err != nil {
			return err
		}
		p.suiteRounds = append(p.suiteRounds, s)
		merge(p.suite, s)
	}
	if b.o.has("hot") {
		s, err := hotLoop(t, b.o.hot, b.o.sessions, nil)
		if err != nil {
			return err
		}
		p.hotRounds = append(p.hotRounds, s)
		merge(p.hot, s)
	}
	return nil
}

func merge(dst, src samples) {
	for op, d := range src {
		dst[op] = append(dst[op], d...)
	}
}

// bigRun is (g)'s large PDS: fakepds with 1,000 accounts of 100 records.
func (b *bench) bigRun(ctx context.Context) error {
	const accounts, records = 1000, 100
	b.logf("big: fakepds with %d accounts x %d records", accounts, records)
	return b.withServer(ctx, "fakepds", func(srv *server, t *target) error {
		if err := populate(t, accounts, records); err != nil {
			return err
		}
		m, err := srv.memory()
		if err != nil {
			return err
		}
		b.res.big, b.res.bigSize = &m, fmt.Sprintf("%d accounts x %d records", accounts, records)
		return nil
	})
}

// withServer runs fn on a fresh server of one kind, outside the rounds.
func (b *bench) withServer(ctx context.Context, name string, fn func(*server, *target) error) (err error) {
	srv, err := b.start(ctx, name, 0)
	if err != nil {
		return err
	}
	defer func() {
		if serr := srv.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	t := newTarget(srv.url, nil)
	defer t.close()
	return fn(srv, t)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if name, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s, %s/%s", runtime.NumCPU(), cpu, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
