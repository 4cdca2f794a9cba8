package reference

import (
	"slices"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/harness/internal/backendtest"
	"github.com/fakepds/fakepds/pds/env"
)

func TestReferenceBackend(t *testing.T) {
	t.Parallel()
	vars, err := env.Read()
	if err != nil {
		t.Fatal(err)
	}
	if vars.Backend != "reference" {
		t.Skipf("starts the npm reference PDS: run with %s=reference after scripts/reference-pds/install.sh", env.Backend)
	}
	backendtest.Exercise(t, harness.NewBackend(t, "reference"))
}

func TestReferenceAttach(t *testing.T) {
	// With HARNESS_PDS_URL the reference backend starts nothing.
	p, err := start(env.Vars{Backend: "reference", URL: "http://127.0.0.1:1/", PLCURL: "http://127.0.0.1:2", AdminPassword: "pw"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.URL() != "http://127.0.0.1:1" || p.PLCURL() != "http://127.0.0.1:2" || p.AdminPassword() != "pw" {
		t.Fatalf("attached to %s %s %s", p.URL(), p.PLCURL(), p.AdminPassword())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReferenceCommand(t *testing.T) {
	environ := []string{"PATH=/bin", "HARNESS_PDS_FSYNC=1", "HARNESS_PDS_DIR=/old", "HOME=/root"}
	argv, envv, err := referenceCommand("/src/scripts/reference-pds/run.sh", env.Vars{Addr: "127.0.0.1:4000", AdminPassword: "pw"}, environ)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(argv, []string{"/src/scripts/reference-pds/run.sh", "--port", "4000"}) {
		t.Errorf("argv %q", argv)
	}
	for _, kv := range []string{"PATH=/bin", "HOME=/root", "HARNESS_PDS_FSYNC=0", "HARNESS_PDS_ADMIN_PASSWORD=pw"} {
		if !slices.Contains(envv, kv) {
			t.Errorf("env lacks %s: %q", kv, envv)
		}
	}
	for _, kv := range envv {
		if strings.HasPrefix(kv, "HARNESS_PDS_DIR=") || kv == "HARNESS_PDS_FSYNC=1" {
			t.Errorf("env keeps %s, which vars overrode", kv)
		}
	}
	argv, _, err = referenceCommand("run.sh", env.Vars{Addr: "127.0.0.1:0"}, nil)
	if err != nil || len(argv) != 1 {
		t.Errorf("port 0: argv %q, %v", argv, err)
	}
	if _, err := referenceScript(); err != nil {
		t.Errorf("referenceScript: %v", err)
	}
}
