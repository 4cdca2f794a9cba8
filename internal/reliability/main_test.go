package reliability

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// soak is FAKEPDS_SOAK=1: the full-size runs of `make soak`.
var soak = os.Getenv("FAKEPDS_SOAK") == "1"

// soakLoad is how long a soak's load test runs: 2 minutes, or
// FAKEPDS_SOAK_LOAD (a Go duration) to watch the memory level off over a
// longer run; none outside a soak.
func soakLoad(t testing.TB) time.Duration {
	if !soak {
		return 0
	}
	v := os.Getenv("FAKEPDS_SOAK_LOAD")
	if v == "" {
		return 2 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("FAKEPDS_SOAK_LOAD=%q: want a positive Go duration (6m)", v)
	}
	return d
}

// scale is n in the default run, full in a soak.
func scale(n, full int) int {
	if soak {
		return full
	}
	return n
}

var (
	binDir string
	// The binary with the race detector when the tests have it (a data
	// race in the server under a test fails that test), and without.
	raceBin  = sync.OnceValues(func() (string, error) { return build("fakepds-race", "-race") })
	plainBin = sync.OnceValues(func() (string, error) { return build("fakepds") })
)

func build(name string, flags ...string) (string, error) {
	bin := filepath.Join(binDir, name)
	args := append(append([]string{"build", "-o", bin}, flags...), "github.com/fakepds/fakepds/harness/cmd/fakepds")
	// go test puts its own go first on PATH.
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build fakepds: %v\n%s", err, out)
	}
	return bin, nil
}

// binary is the fakepds binary, built on first use: under the race
// detector when race is set and the tests run with it.
func binary(t testing.TB, race bool) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the fakepds binary: not under -short")
	}
	get := plainBin
	if race && raceEnabled {
		get = raceBin
	}
	bin, err := get()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "fakepds-reliability-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}
