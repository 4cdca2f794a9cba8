package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as the fakepds it measures (-fakepds self), so
// that the smoke run needs no build.
func TestMain(m *testing.M) {
	if os.Getenv(floorEnv) != "" {
		if err := serveFloor(); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	if p := os.Getenv(serveEnv); p != "" {
		if err := serveInProcess(p); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The smoke run measures every operation on fakepds and on the floor,
// and reads fakepds's own stats for each.
func TestShort(t *testing.T) {
	var out, progress bytes.Buffer
	args := []string{"-short", "-fakepds", "self", "-growth", "-grow-records", "10", "-grow-accounts", "5"}
	if err := run(t.Context(), args, &out, &progress); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	report := out.String()
	for _, section := range []string{"### (a) Suite-shaped", "### (b) Hot loop", "### (c) 2 concurrent writers", "### (e)", "### (f)", "### (g)", "### The issue's targets"} {
		if !strings.Contains(report, section) {
			t.Errorf("no section %q in\n%s", section, report)
		}
	}
	for _, title := range []string{"### (a)", "### (b)"} {
		rows := tableRows(report, title)
		for _, op := range operations {
			row, ok := rows[op]
			if !ok {
				t.Errorf("%s: no row for %s", title, op)
				continue
			}
			// fakepds p50 and p95, the floor's p50, fakepds's own p50.
			for _, col := range []int{1, 2, 6, 8} {
				if !strings.HasSuffix(row[col], " ms") {
					t.Errorf("%s %s: column %d is %q, want a duration", title, op, col, row[col])
				}
			}
		}
	}
	if rows := tableRows(report, "### (c)"); !strings.HasSuffix(rows["fakepds"][2], " ms") {
		t.Errorf("concurrent writers: %q", rows["fakepds"])
	}
	if rows := tableRows(report, "### (g)"); !strings.HasSuffix(rows["fakepds"][1], " MiB") {
		t.Errorf("RSS: %q", rows["fakepds"])
	}
	for title, row := range map[string]string{"### How cost grows: one repo": "10", "### How cost grows: the PDS": "5"} {
		cells := tableRows(report, title)[row]
		if len(cells) < 3 || !strings.Contains(cells[1], " ms / ") || strings.Contains(cells[1], "-") {
			t.Errorf("%s: row %s is %q, want client / server p50s", title, row, cells)
		}
	}
	if t.Failed() {
		t.Log(report)
	}
}

// tableRows are the markdown table rows after the heading that starts
// with title, by their first cell.
func tableRows(report, title string) map[string][]string {
	i := strings.Index(report, title)
	if i < 0 {
		return nil
	}
	rows := map[string][]string{}
	inTable := false
	for line := range strings.SplitSeq(report[i:], "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows[cells[0]] = cells
	}
	return rows
}

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	if q := quantile(ds, 0.5); q != 51 {
		t.Errorf("p50 of 1..100 = %d", q)
	}
	if q := quantile(ds, 0.95); q != 96 {
		t.Errorf("p95 of 1..100 = %d", q)
	}
	if ds[0] != 100 {
		t.Error("quantile sorted its input")
	}
}

func TestConformanceLine(t *testing.T) {
	m := passLine.FindStringSubmatch("--- PASS: TestConformance/inprocess/repo-create-get (0.04s)")
	if m == nil || m[1] != "PASS" || m[2] != "repo-create-get" || m[3] != "0.04" {
		t.Fatalf("%q", m)
	}
}
