package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fakepds/fakepds/pds/stats"
)

// growthPoint is one size of -growth: client and server p50 by operation.
type growthPoint struct {
	size           int
	client, server map[string]time.Duration
}

// growthOps are the operations measured as one repo grows.
var growthOps = []string{"createRecord", "getRecord"}

const growthCalls = 50

// growthRun measures, on fakepds only, a write's and a read's p50 as one
// repo grows, and the suite-shaped workload's as the PDS grows in
// accounts (the accounts added between points hold no records: the cost
// in question is the PDS's per-account state, not repo size).
func (b *bench) growthRun(ctx context.Context) error {
	return b.withServer(ctx, "fakepds", b.growth)
}

func (b *bench) growth(srv *server, t *target) error {
	a, _, err := t.createAccount()
	if err != nil {
		return err
	}
	have := 0
	for _, size := range b.o.growRecords {
		b.logf("growth: one repo of %d records", size)
		if size > have {
			if err := a.fill(size - have); err != nil {
				return err
			}
			have = size
		}
		if err := srv.resetStats(); err != nil {
			return err
		}
		s := samples{}
		var rkey string
		for range growthCalls {
			k, d, err := a.createRecord()
			if err != nil {
				return err
			}
			rkey = k
			s.add("createRecord", d)
		}
		have += growthCalls
		for range growthCalls {
			d, err := a.getRecord(rkey)
			if err != nil {
				return err
			}
			s.add("getRecord", d)
		}
		st, err := srv.serverStats()
		if err != nil {
			return err
		}
		b.res.growRepo = append(b.res.growRepo, point(size, s, st))
	}

	accounts := 1 // the repo's above
	for _, size := range b.o.growAccounts {
		b.logf("growth: a PDS of %d accounts", size)
		if size > accounts {
			if err := populate(t, size-accounts, 0); err != nil {
				return err
			}
			accounts = size
		}
		s, st, err := suiteWithStats(srv, t, b.o.n)
		if err != nil {
			return err
		}
		accounts += b.o.n
		b.res.growPDS = append(b.res.growPDS, point(size, s, st))
	}
	return nil
}

func point(size int, s samples, st map[string]stats.Method) growthPoint {
	pt := growthPoint{size: size, client: map[string]time.Duration{}, server: map[string]time.Duration{}}
	for op, d := range s {
		pt.client[op] = quantile(d, 0.5)
		pt.server[op] = st[nsids[op]].P50
	}
	return pt
}

func (b *bench) reportGrowth(w io.Writer) {
	growthTable(w, fmt.Sprintf("How cost grows: one repo (fakepds; %d createRecord then %d getRecord at each size; p50 client / server)", growthCalls, growthCalls),
		"records in the repo", growthOps, b.res.growRepo)
	growthTable(w, fmt.Sprintf("How cost grows: the PDS (fakepds; the suite-shaped workload of %d accounts on a PDS that already holds N accounts; p50 client / server)", b.o.n),
		"accounts (N)", operations, b.res.growPDS)
}

func growthTable(w io.Writer, title, sizeName string, ops []string, points []growthPoint) {
	if len(points) == 0 {
		return
	}
	fmt.Fprintf(w, "### %s\n\n| %s |", title, sizeName)
	for _, op := range ops {
		fmt.Fprintf(w, " %s |", op)
	}
	fmt.Fprint(w, "\n|---|"+strings.Repeat("---|", len(ops))+"\n")
	for _, pt := range points {
		fmt.Fprintf(w, "| %d |", pt.size)
		for _, op := range ops {
			fmt.Fprintf(w, " %s / %s |", ms(pt.client[op]), ms(pt.server[op]))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}
