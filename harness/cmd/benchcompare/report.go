package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fakepds/fakepds/pds/env"
	"github.com/fakepds/fakepds/pds/stats"
)

// quantile is the q-quantile of ds (nearest rank); 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

// ms formats d in milliseconds with 2-3 significant digits.
func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func ratio(a, b time.Duration) float64 {
	if a <= 0 || b <= 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

func x(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "-"
	}
	if r >= 100 {
		return fmt.Sprintf("%.0fx", r)
	}
	return fmt.Sprintf("%.1fx", r)
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

// rangeOf is the per-round p50s as "lo-hi" (one value when one round).
func rangeOf(rounds []samples, op string) string {
	var p50s []time.Duration
	for _, s := range rounds {
		if len(s[op]) > 0 {
			p50s = append(p50s, quantile(s[op], 0.5))
		}
	}
	if len(p50s) == 0 {
		return "-"
	}
	lo, hi := slices.Min(p50s), slices.Max(p50s)
	if lo == hi || len(p50s) == 1 {
		return ms(lo)
	}
	return strings.TrimSuffix(ms(lo), " ms") + "-" + ms(hi)
}

// serverP50 is fakepds's own p50 of op over rounds (the median of the
// rounds' p50s).
func serverP50(rounds []map[string]stats.Method, op string) time.Duration {
	var v []time.Duration
	for _, r := range rounds {
		if m, ok := r[nsids[op]]; ok {
			v = append(v, m.P50)
		}
	}
	return quantile(v, 0.5)
}

// e2eTargets are the end-to-end ratios (fakepds / reference).
var e2eTargets = map[string]float64{
	"createRecord": 20, "putRecord": 20, "deleteRecord": 20,
	"applyWrites": 14,
	"getRecord":   10, "listRecords": 10, "getRepo": 10, "uploadBlob": 10,
	"createAccount": 35,
	"createSession": 700,
}

// verdict is one line of the targets table.
type verdict struct{ what, target, measured, met string }

func metStr(ok bool, short string) string {
	switch {
	case ok:
		return "met"
	case short == "":
		return "**not met**"
	}
	return "**not met** (" + short + ")"
}

func (b *bench) report(w io.Writer) {
	o, res := b.o, b.res
	fsync := "off (synchronous=OFF on both)"
	if v, _ := env.Read(); v.Fsync {
		fsync = "on (HARNESS_PDS_FSYNC=1: durable on both)"
	}
	fmt.Fprintf(w, "Command: `%s`\n\n", o.commandLine)
	order := strings.Join(o.targets, ", ")
	if b.floor != nil {
		order += ", then the floor"
	}
	fmt.Fprintf(w, "Machine: %s; load average %s at the start, %s at the end. fsync %s. %d round(s), each starting every server afresh, in the order %s; after each start an unmeasured warm-up of %d accounts.\n\n",
		machine(), b.loadBefore, b.loadAfter, fsync, o.rounds, order, o.warmup)
	fk, ref, fl := res.by["fakepds"], res.by["reference"], res.by["floor"]
	var verdicts []verdict

	table := func(title string, get func(p *perTarget) (samples, []samples), server func(p *perTarget) []map[string]stats.Method, withTargets bool) {
		if fk == nil && ref == nil {
			return
		}
		fmt.Fprintf(w, "### %s\n\n", title)
		fmt.Fprintln(w, "| operation | fakepds p50 (rounds) | p95 | reference p50 (rounds) | p95 | ratio | floor p50 | cap | fakepds server p50 | server-side ratio |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
		for _, op := range operations {
			row := []string{op, "-", "-", "-", "-", "-", "-", "-", "-", "-"}
			var fp50, rp50, flp50, sp50 time.Duration
			if fk != nil {
				all, rounds := get(fk)
				if len(all[op]) == 0 {
					continue
				}
				fp50 = quantile(all[op], 0.5)
				row[1], row[2] = rangeOf(rounds, op), ms(quantile(all[op], 0.95))
				sp50 = serverP50(server(fk), op)
				row[8] = ms(sp50)
			}
			if ref != nil {
				all, rounds := get(ref)
				rp50 = quantile(all[op], 0.5)
				row[3], row[4] = rangeOf(rounds, op), ms(quantile(all[op], 0.95))
			}
			if fl != nil {
				all, _ := get(fl)
				flp50 = quantile(all[op], 0.5)
				row[6] = ms(flp50)
			}
			e2e, capR, srvR := ratio(rp50, fp50), ratio(rp50, flp50), ratio(rp50-flp50, sp50)
			row[5], row[7], row[9] = x(e2e), x(capR), x(srvR)
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			if want, ok := e2eTargets[op]; ok && withTargets && fk != nil && ref != nil {
				v := verdict{what: op + " (suite-shaped)", target: fmt.Sprintf(">= %gx end to end", want)}
				switch {
				case e2e >= want:
					v.measured, v.met = x(e2e)+" end to end", "met"
				case capR < want:
					// The floor caps the end-to-end ratio: the server side must meet it.
					v.measured = fmt.Sprintf("%s end to end (floor caps it at %s); server-side %s", x(e2e), x(capR), x(srvR))
					v.met = metStr(srvR >= want, fmt.Sprintf("server-side %.0f%% of the target", 100*srvR/want))
				default:
					v.measured = x(e2e) + " end to end (cap " + x(capR) + ")"
					v.met = metStr(false, fmt.Sprintf("%.0f%% of the target", 100*e2e/want))
				}
				verdicts = append(verdicts, v)
			}
		}
		fmt.Fprintln(w)
	}
	if o.has("suite") || o.has("hot") {
		fmt.Fprintln(w, "Ratio: reference p50 / fakepds p50, both pooled over the rounds. Floor: the same calls from the same client against a server that does no work (a Go net/http handler in a child process of this tool, answering each method with the bytes fakepds answered it); cap: reference p50 / floor p50, the largest ratio that floor allows. Server-side ratio: (reference p50 - floor p50) / fakepds's own p50 from its stats (the median of the rounds'). Every p50/p95 is of the calls pooled over the rounds; \"(rounds)\" shows each round's p50.")
		fmt.Fprintln(w)
	}
	if o.has("suite") {
		table(fmt.Sprintf("(a) Suite-shaped: %d accounts, each operation once per account, operation after operation", o.n),
			func(p *perTarget) (samples, []samples) { return p.suite, p.suiteRounds },
			func(p *perTarget) []map[string]stats.Method { return p.serverSuite }, true)
	}
	if o.has("hot") {
		table(fmt.Sprintf("(b) Hot loop: one account, each operation %d times back to back (createSession %d)", o.hot, min(o.hot, o.sessions)),
			func(p *perTarget) (samples, []samples) { return p.hot, p.hotRounds },
			func(p *perTarget) []map[string]stats.Method { return p.serverHot }, false)
	}
	if o.has("suite") && o.has("hot") && fk != nil {
		fmt.Fprintln(w, "### fakepds server side: suite-shaped against the hot loop (target: within 1.3x for every operation)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| operation | suite-shaped p50 | hot-loop p50 | suite / hot |")
		fmt.Fprintln(w, "|---|---|---|---|")
		worst, worstOp := 0.0, ""
		for _, op := range operations {
			s, h := serverP50(fk.serverSuite, op), serverP50(fk.serverHot, op)
			r := ratio(s, h)
			if r > worst {
				worst, worstOp = r, op
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", op, ms(s), ms(h), x(r))
		}
		fmt.Fprintln(w)
		verdicts = append(verdicts, verdict{"fakepds server-side p50, suite-shaped / hot loop", "<= 1.3x for every operation",
			fmt.Sprintf("worst %s (%s)", x(worst), worstOp), metStr(worst <= 1.3, fmt.Sprintf("%.0f%% over", 100*(worst/1.3-1)))})
	}
	if o.has("concurrent") {
		fmt.Fprintf(w, "### (c) %d concurrent writers (createRecord, each in its own repo) for %s\n\n", o.writers, o.duration)
		fmt.Fprintln(w, "| server | writes/s (rounds) | p50 | p95 |")
		fmt.Fprintln(w, "|---|---|---|---|")
		mean := func(p *perTarget) float64 {
			t := 0.0
			for _, v := range p.writesPerSec {
				t += v
			}
			return t / float64(len(p.writesPerSec))
		}
		for _, name := range o.targets {
			p := res.by[name]
			var per []string
			for _, v := range p.writesPerSec {
				per = append(per, fmt.Sprintf("%.0f", v))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, strings.Join(per, ", "), ms(quantile(p.writeLatency, 0.5)), ms(quantile(p.writeLatency, 0.95)))
		}
		fmt.Fprintln(w)
		if fk != nil && ref != nil {
			r := mean(fk) / mean(ref)
			p95 := quantile(fk.writeLatency, 0.95)
			verdicts = append(verdicts, verdict{fmt.Sprintf("%d concurrent writers", o.writers), ">= 20x the reference's writes/s, fakepds p95 <= 5 ms",
				fmt.Sprintf("%s writes/s; p95 %s", x(r), ms(p95)), metStr(r >= 20 && p95 <= 5*time.Millisecond, concurrentShort(r, p95))})
		}
	}
	if o.has("conformance") {
		fmt.Fprintln(w, "### (d) The conformance scenarios (harness/conformance), one at a time, summed; server start excluded")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| backend | scenarios | summed (rounds) |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, name := range o.targets {
			p := res.by[name]
			var per []string
			for _, d := range p.conformance {
				per = append(per, ms(d))
			}
			fmt.Fprintf(w, "| %s | %d | %s |\n", conformanceBackend(name), p.scenarios, strings.Join(per, ", "))
		}
		fmt.Fprintln(w)
		if fk != nil && ref != nil {
			r := ratio(quantile(ref.conformance, 0.5), quantile(fk.conformance, 0.5))
			v := verdict{"whole suite (conformance scenarios, summed)", ">= 20x", x(r), metStr(r >= 20, fmt.Sprintf("%.0f%% of the target", 100*r/20))}
			if math.IsNaN(r) { // a sum under go test's 10 ms resolution
				v.met = "not measured"
			}
			verdicts = append(verdicts, v)
		}
	}
	if o.has("idle") {
		fmt.Fprintf(w, "### (e) A createRecord after %s idle, to its #commit frame at a subscriber (%d per round)\n\n", o.idle, o.idleReps)
		fmt.Fprintln(w, "| server | from sending the write: p50 / max | after the write's response: p50 / max |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, name := range o.targets {
			var from, after []time.Duration
			for _, f := range res.by[name].frames {
				from, after = append(from, f.fromSend), append(after, f.afterResponse)
			}
			fmt.Fprintf(w, "| %s | %s / %s | %s / %s |\n", name, ms(quantile(from, 0.5)), ms(slices.Max(from)), signed(quantile(after, 0.5)), signed(slices.Max(after)))
		}
		fmt.Fprintln(w)
		if fk != nil {
			var worst time.Duration
			for _, f := range fk.frames {
				worst = max(worst, f.afterResponse)
			}
			verdicts = append(verdicts, verdict{"write after idle -> its frame at a subscriber", "<= 1 ms (after the write's response)", signed(worst) + " worst", metStr(worst <= time.Millisecond, "")})
		}
	}
	if o.has("start") {
		fmt.Fprintln(w, "### (f) Process start to first answer (ready line, then one _health answered)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| server | rounds |")
		fmt.Fprintln(w, "|---|---|")
		for _, name := range o.targets {
			var per []string
			for _, d := range res.by[name].starts {
				per = append(per, ms(d))
			}
			fmt.Fprintf(w, "| %s | %s |\n", name, strings.Join(per, ", "))
		}
		fmt.Fprintln(w)
		if res.harnessNew > 0 {
			fmt.Fprintf(w, "`harness.New` + its Close (harness `BenchmarkNew`, `go test -run '^$' -bench '^BenchmarkNew$' -benchtime 50x ./harness`): %s\n\n", ms(res.harnessNew))
		}
		if fk != nil && ref != nil {
			r := ratio(quantile(ref.starts, 0.5), quantile(fk.starts, 0.5))
			verdicts = append(verdicts, verdict{"process start to first answer", "<= 1/50 of the reference", "1/" + strings.TrimSuffix(x(r), "x"), metStr(r >= 50, "")})
		}
		if res.harnessNew > 0 {
			verdicts = append(verdicts, verdict{"harness.New", "<= 5 ms", ms(res.harnessNew), metStr(res.harnessNew <= 5*time.Millisecond, "")})
		}
	}
	if o.has("rss") {
		fmt.Fprintln(w, "### (g) Resident memory of the server process (/proc/PID/status: VmRSS, and VmHWM the peak)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| server | ready: RSS (rounds) | after the round's workloads: RSS / peak |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, name := range o.targets {
			p := res.by[name]
			var ready, after []string
			for i, m := range p.ready {
				ready = append(ready, mib(m.RSS))
				after = append(after, mib(p.after[i].RSS)+" / "+mib(p.after[i].HWM))
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", name, strings.Join(ready, ", "), strings.Join(after, ", "))
		}
		if res.big != nil {
			fmt.Fprintf(w, "| fakepds, %s | | %s / %s |\n", res.bigSize, mib(res.big.RSS), mib(res.big.HWM))
		}
		fmt.Fprintln(w)
		if fk != nil {
			var peak int64
			for _, m := range fk.after {
				peak = max(peak, m.HWM)
			}
			if ref != nil {
				r := float64(medianRSS(ref.ready)) / float64(medianRSS(fk.ready))
				verdicts = append(verdicts, verdict{"RSS when ready", "<= 1/5 of the reference's", "1/" + strings.TrimSuffix(x(r), "x"), metStr(r >= 5, "")})
			}
			verdicts = append(verdicts, verdict{"RSS after the workload (peak)", "<= 100 MiB", mib(peak), metStr(peak <= 100<<20, "")})
		}
		if res.big != nil {
			verdicts = append(verdicts, verdict{"RSS, " + res.bigSize + " (peak)", "<= 300 MiB", mib(res.big.HWM), metStr(res.big.HWM <= 300<<20, "")})
		}
	}
	b.reportGrowth(w)
	if len(verdicts) > 0 {
		fmt.Fprintln(w, "### The issue's targets")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| what | target | measured | |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for _, v := range verdicts {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", v.what, v.target, v.measured, v.met)
		}
		fmt.Fprintln(w)
	}
}

func medianRSS(ms []memory) int64 {
	v := make([]int64, len(ms))
	for i, m := range ms {
		v[i] = m.RSS
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

func signed(d time.Duration) string {
	if d < 0 {
		return "-" + ms(-d)
	}
	if d == 0 {
		return "0 ms"
	}
	return ms(d)
}

func concurrentShort(r float64, p95 time.Duration) string {
	var out []string
	if r < 20 {
		out = append(out, fmt.Sprintf("writes/s %.0f%% of the target", 100*r/20))
	}
	if p95 > 5*time.Millisecond {
		out = append(out, fmt.Sprintf("p95 %.1fx the limit", float64(p95)/float64(5*time.Millisecond)))
	}
	return strings.Join(out, "; ")
}
