// Command benchcompare measures fakepds beside the npm reference PDS with
// one low-overhead client (raw XRPC over keep-alive net/http) and prints
// markdown tables: per operation p50 and p95 on each server, their ratio,
// the client's own floor (the same calls against a server, started by this
// command, that does no work) and the largest ratio that floor allows, and
// fakepds's own server-side p50 from its stats. It starts what it compares
// (the fakepds binary, scripts/reference-pds/run.sh) and alternates rounds
// (fakepds, reference, floor, fakepds, ...) so that machine drift cancels.
//
//	go run ./harness/cmd/benchcompare [flags]   (make bench-compare)
//
// Workloads (-workloads, comma-separated; see docs/perf.md):
//
//	suite        (a) N accounts, each operation once per account, operation after operation
//	hot          (b) the same operations back to back on one account
//	concurrent   (c) 16 clients writing to their own repos for 10 s
//	conformance  (d) the conformance scenarios (harness/conformance), timed per backend
//	idle         (e) a write after 2 s idle, to its firehose frame at a subscriber
//	start        (f) process start to first answer; harness.New
//	rss          (g) resident memory when ready and after the round's workloads
//
// -big adds a fakepds with 1,000 accounts of 100 records (its RSS), and
// -growth how a write's and the suite's cost grow with the repo and the
// PDS. -short is a smoke run against fakepds only, in seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	if os.Getenv(floorEnv) != "" {
		if err := serveFloor(); err != nil {
			fmt.Fprintln(os.Stderr, "benchcompare floor:", err)
			os.Exit(1)
		}
		return
	}
	if os.Getenv(serveEnv) != "" {
		if err := serveInProcess(os.Getenv(serveEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "benchcompare serve:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "benchcompare:", err)
		os.Exit(1)
	}
}

var allWorkloads = []string{"suite", "hot", "concurrent", "conformance", "idle", "start", "rss"}

type options struct {
	workloads     []string
	targets       []string
	rounds        int
	n             int
	hot           int
	sessions      int
	warmup        int
	writers       int
	duration      time.Duration
	idle          time.Duration
	idleReps      int
	big           bool
	growth        bool
	growRecords   []int
	growAccounts  []int
	fakepds       string
	reference     string
	root          string
	cpuprofile    string
	benchHarness  bool
	short         bool
	commandLine   string
	conformanceRx string
}

func (o *options) has(w string) bool { return slices.Contains(o.workloads, w) }

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("benchcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workloads := fs.String("workloads", strings.Join(allWorkloads, ","), "workloads to run, comma-separated: "+strings.Join(allWorkloads, ", "))
	targets := fs.String("targets", "fakepds,reference", "servers to compare, in each round's order: fakepds, reference")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds; each starts every target afresh and runs every workload on it")
	fs.IntVar(&o.n, "n", 40, "accounts of the suite-shaped workload")
	fs.IntVar(&o.hot, "hot", 50, "calls per operation in the hot loop")
	fs.IntVar(&o.sessions, "sessions", 10, "createSession calls in the hot loop (the reference pads each login to 350 ms)")
	fs.IntVar(&o.warmup, "warmup", 5, "accounts of an unmeasured suite-shaped run after each start (JIT, caches)")
	fs.IntVar(&o.writers, "writers", 16, "clients of the concurrent workload")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long the concurrent workload writes")
	fs.DurationVar(&o.idle, "idle", 2*time.Second, "how long the server idles before each write of the idle workload")
	fs.IntVar(&o.idleReps, "idle-reps", 3, "writes of the idle workload per round")
	fs.BoolVar(&o.big, "big", false, "also a fakepds with 1,000 accounts x 100 records: its RSS (slow, fakepds only)")
	fs.BoolVar(&o.growth, "growth", false, "also how cost grows (fakepds only): a write's p50 as one repo grows (-grow-records), the suite-shaped workload as the PDS grows (-grow-accounts)")
	growRecords := fs.String("grow-records", "10,100,1000,10000", "repo sizes of -growth (100000 takes minutes)")
	growAccounts := fs.String("grow-accounts", "10,100,1000", "PDS sizes (accounts) of -growth (10000 takes minutes)")
	fs.StringVar(&o.fakepds, "fakepds", "", "the fakepds binary (default: built from this checkout into a temp dir; \"self\": this tool serves the same pds.Server itself, as with -cpuprofile)")
	fs.StringVar(&o.reference, "reference", "", "the reference's run.sh (default: ROOT/scripts/reference-pds/run.sh; install it first with install.sh)")
	fs.StringVar(&o.root, "root", "", "this module's root (default: from go env GOMOD)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "run fakepds in this tool's own process (the same pds.Server) and write its CPU profile here at the end of each round (round N > 1: FILE.N)")
	fs.BoolVar(&o.benchHarness, "bench-harness", true, "with the start workload, run harness's BenchmarkNew (compiles the harness tests)")
	fs.StringVar(&o.conformanceRx, "conformance-run", "", "with the conformance workload, only scenarios matching this -test.run pattern (below TestConformance/BACKEND/)")
	fs.BoolVar(&o.short, "short", false, "smoke run: fakepds only, 3 accounts, a few calls, no conformance or harness benchmark (seconds)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.short {
		def := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		def("targets", func() { *targets = "fakepds" })
		def("rounds", func() { o.rounds = 1 })
		def("n", func() { o.n = 3 })
		def("hot", func() { o.hot = 3 })
		def("sessions", func() { o.sessions = 2 })
		def("warmup", func() { o.warmup = 1 })
		def("writers", func() { o.writers = 2 })
		def("duration", func() { o.duration = 300 * time.Millisecond })
		def("idle", func() { o.idle = 50 * time.Millisecond })
		def("idle-reps", func() { o.idleReps = 1 })
		def("bench-harness", func() { o.benchHarness = false })
		def("workloads", func() { *workloads = "suite,hot,concurrent,idle,start,rss" })
	}
	var err error
	if o.workloads, err = list(*workloads, allWorkloads); err != nil {
		return nil, fmt.Errorf("-workloads: %w", err)
	}
	if o.targets, err = list(*targets, []string{"fakepds", "reference"}); err != nil {
		return nil, fmt.Errorf("-targets: %w", err)
	}
	if o.growRecords, err = ints(*growRecords); err != nil {
		return nil, fmt.Errorf("-grow-records: %w", err)
	}
	if o.growAccounts, err = ints(*growAccounts); err != nil {
		return nil, fmt.Errorf("-grow-accounts: %w", err)
	}
	if o.rounds < 1 || o.n < 1 || o.hot < 2 || o.writers < 1 || o.idleReps < 1 {
		return nil, errors.New("-rounds, -n, -writers and -idle-reps must be at least 1, -hot at least 2")
	}
	o.commandLine = strings.Join(append([]string{"benchcompare"}, args...), " ")
	return o, nil
}

func list(s string, accepted []string) ([]string, error) {
	var out []string
	for _, x := range strings.Split(s, ",") {
		x = strings.TrimSpace(x)
		if x == "" {
			continue
		}
		if !slices.Contains(accepted, x) {
			return nil, fmt.Errorf("unknown %q (accepted: %s)", x, strings.Join(accepted, ", "))
		}
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out, nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, x := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(x), "%d", &n); err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", x)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.root == "" {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
			return fmt.Errorf("cannot find the module root (go env GOMOD: %v); run from the checkout or pass -root", err)
		}
		o.root = filepath.Dir(strings.TrimSpace(string(out)))
	}
	tmp, err := os.MkdirTemp("", "benchcompare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bench{o: o, tmp: tmp, progress: stderr, res: newResults()}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	if err := b.run(ctx); err != nil {
		return err
	}
	b.report(stdout)
	return nil
}
