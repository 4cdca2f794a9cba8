package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// conformanceBackend is the conformance suite's name for a target: the
// suite runs fakepds in-process (the same pds.Server the binary serves).
func conformanceBackend(target string) string {
	if target == "fakepds" {
		return "inprocess"
	}
	return target
}

var passLine = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): TestConformance/[^/]+/(\S+) \(([0-9.]+)s\)`)

// conformance is workload (d): the conformance scenarios on one backend,
// one at a time (-test.parallel=1), timed from the first scenario's start
// to the last one's end, so the backend's start and close are excluded.
// go test streams "=== CONT" as each paused scenario starts but reports
// the ends only after the backend closes, so a scenario lasts until the
// next one starts, and the last one as long as its reported duration.
func (b *bench) conformance(ctx context.Context, target string) error {
	backend := conformanceBackend(target)
	b.logf("conformance scenarios on %s", backend)
	pattern := "^TestConformance$/^" + backend + "$"
	if b.o.conformanceRx != "" {
		pattern += "/" + b.o.conformanceRx
	}
	cmd := exec.CommandContext(ctx, b.conformanceBin, "-test.run", pattern, "-test.v", "-test.parallel=1", "-test.count=1", "-backends="+backend)
	cmd.Dir = filepath.Join(b.o.root, "harness", "conformance") // the goldens are relative
	cmd.Env = childEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	cont := "=== CONT  TestConformance/" + backend + "/"
	var (
		first, last time.Time
		lastName    string
		reported    = map[string]time.Duration{}
		failed      []string
		output      strings.Builder
		ran         int
	)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		at, line := time.Now(), sc.Text()
		output.WriteString(line + "\n")
		if name, ok := strings.CutPrefix(line, cont); ok {
			if first.IsZero() {
				first = at
			}
			last, lastName = at, strings.TrimSpace(name)
			continue
		}
		if m := passLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			sec, _ := strconv.ParseFloat(m[3], 64)
			reported[m[2]] = time.Duration(sec * float64(time.Second))
			switch m[1] {
			case "FAIL":
				failed = append(failed, m[2])
			case "PASS":
				ran++
			}
		}
	}
	werr := cmd.Wait()
	if len(failed) > 0 || werr != nil {
		out := output.String()
		if len(out) > 6000 {
			out = out[len(out)-6000:]
		}
		return fmt.Errorf("conformance on %s: %v; failed: %v\n%s%s", backend, werr, failed, out, stderr.String())
	}
	if first.IsZero() || ran == 0 {
		return fmt.Errorf("conformance on %s: no scenario ran (pattern %s)\n%s", backend, pattern, output.String())
	}
	p := b.res.get(target)
	p.conformance = append(p.conformance, last.Sub(first)+reported[lastName])
	p.scenarios = ran
	return nil
}

var nsPerOp = regexp.MustCompile(`^BenchmarkNew-?\d*\s+\d+\s+([0-9.]+) ns/op`)

// benchmarkNew runs harness's BenchmarkNew (harness.New and its Close).
func (b *bench) benchmarkNew(ctx context.Context) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkNew$", "-benchtime", "50x", "-count", "1", "./harness")
	cmd.Dir = b.o.root
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("harness BenchmarkNew: %w\n%s", err, out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if m := nsPerOp.FindStringSubmatch(line); m != nil {
			ns, _ := strconv.ParseFloat(m[1], 64)
			return time.Duration(ns), nil
		}
	}
	return 0, fmt.Errorf("harness BenchmarkNew: no ns/op in\n%s", out)
}
