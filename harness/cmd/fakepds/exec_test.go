package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/fakepds/fakepds/pds/env"
)

// childArg makes the test binary a CMD for exec: `<test binary> childArg
// MODE`, handled in TestMain before anything else.
const childArg = "fakepds-test-child"

// childReport is what the "env" child prints.
type childReport struct {
	Env map[string]string `json:"env"`
	DID string            `json:"did"`
}

// child is CMD in the exec tests.
//
//	env      print the HARNESS_PDS_* variables it got and the DID of an
//	         account it made on HARNESS_PDS_URL; exit 0
//	exit:N   exit N
//	signal   print "ready", then exit 42 on SIGTERM (1 after 30 s)
func child(mode string) int {
	switch {
	case mode == "env":
		r := childReport{Env: map[string]string{}}
		for _, kv := range os.Environ() {
			if name, value, _ := strings.Cut(kv, "="); strings.HasPrefix(name, env.Prefix) {
				r.Env[name] = value
			}
		}
		email, pw := "child@example.com", "pw"
		out, err := comatproto.ServerCreateAccount(context.Background(), atclient.NewAPIClient(os.Getenv(env.URL)),
			&comatproto.ServerCreateAccount_Input{Handle: "child.test", Email: &email, Password: &pw})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: createAccount:", err)
			return 1
		}
		r.DID = out.Did
		json.NewEncoder(os.Stdout).Encode(r)
		return 0
	case strings.HasPrefix(mode, "exit:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(mode, "exit:"))
		return n
	case mode == "signal":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		fmt.Println("ready")
		select {
		case <-sigs:
			return 42
		case <-time.After(30 * time.Second):
			return 1
		}
	}
	return 3
}

// CMD gets the variables to attach with, and none of those that configure
// the PDS exec started; it talks to that PDS; exec exits with its status.
func TestExecEnv(t *testing.T) {
	t.Parallel()
	cmd := fakepds(t, []string{env.AdminPassword + "=pw", env.Dir + "=" + t.TempDir(), env.Addr + "=127.0.0.1:0", env.Stats + "=1"},
		"exec", "--fixtures", socialFixture, "--", os.Args[0], childArg, "env")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("exec: %v\nstderr:\n%s", err, stderr.String())
	}
	var r childReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	// HARNESS_PDS_ADDR=127.0.0.1:0 names the PDS by that IP, as given; the
	// PLC directory, given no address, is named localhost.
	if !strings.HasPrefix(r.Env[env.URL], "http://127.0.0.1:") || !strings.HasPrefix(r.Env[env.PLCURL], "http://localhost:") ||
		r.Env[env.AdminPassword] != "pw" || !strings.HasPrefix(r.DID, "did:plc:") {
		t.Fatalf("child report %+v", r)
	}
	for _, name := range []string{env.Dir, env.Addr, env.Stats} {
		if _, ok := r.Env[name]; ok {
			t.Errorf("CMD got %s", name)
		}
	}
	// HARNESS_PDS_STATS=1: exec prints the server's stats once, after CMD,
	// including the fixture's writes and CMD's call.
	for _, want := range []string{"fakepds server-side stats", "com.atproto.repo.createRecord", "com.atproto.server.createAccount"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestExecStatus(t *testing.T) {
	t.Parallel()
	notExecutable := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"CMD's status", []string{"--", os.Args[0], childArg, "exit:7"}, 7},
		{"CMD's success", []string{os.Args[0], childArg, "exit:0"}, 0},
		{"CMD not found", []string{"--", "fakepds-no-such-command"}, 127},
		{"CMD not executable", []string{"--", notExecutable}, 126},
		{"no CMD", []string{"--"}, 2},
		{"PDS fails to start", []string{"--addr", "not an address", "--", "true"}, 125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := fakepds(t, nil, append([]string{"exec"}, tc.args...)...).CombinedOutput()
			code := 0
			if ee, ok := errors.AsType[*exec.ExitError](err); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Fatalf("exit %d, want %d\n%s", code, tc.want, out)
			}
		})
	}
}

// SIGTERM to exec reaches CMD; exec waits for it and exits with its
// status.
func TestExecForwardsSignals(t *testing.T) {
	t.Parallel()
	cmd := fakepds(t, nil, "exec", "--", os.Args[0], childArg, "signal")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("child did not start; stderr:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 42 {
		t.Fatalf("exec after SIGTERM: %v (want exit 42, CMD's)\nstderr:\n%s", err, stderr.String())
	}
}

// The "done when": `fakepds exec -- go test ./...` over two
// packages, each with harness.Main in TestMain, shows both attached to one
// PDS. One package also loads the social fixture with WithFixtures into
// that shared PDS (with handles of its own).
func TestExecGoTestSharesOnePDS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a two-package Go module (20-40 s); not in -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	proof := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	testFile := func(pkg, main, extra string) string {
		return `package ` + pkg + `

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fakepds/fakepds/harness"
)

func TestMain(m *testing.M) { ` + main + ` }

func TestShared(t *testing.T) {
	p := harness.Shared(t)
	a := p.NewAccount(t)
	` + extra + `
	line := fmt.Sprintf("%s %s %v %s", os.Getenv("HARNESS_PDS_URL"), p.URL(), p.Server() == nil, a.DID)
	if err := os.WriteFile(filepath.Join(os.Getenv("PROOF_DIR"), "` + pkg + `"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}
`
	}
	files := map[string]string{
		"go.mod": "module example.com/proof\n\ngo 1.26.0\n\nrequire github.com/fakepds/fakepds v0.0.0-00010101000000-000000000000\n\nreplace github.com/fakepds/fakepds => " + root + "\n",
		"go.sum": string(sum),
		"pkga/a_test.go": testFile("pkga", `harness.Main(m, harness.WithFixtures(`+strconv.Quote(filepath.Join(root, "fixtures/social/social.json"))+`))`, `
	alice := p.FixtureAccount(t, "alice")
	if alice.Handle.String() == "alice.test" {
		t.Fatalf("fixture handle %s: not made unique", alice.Handle)
	}
	p.RequireRecord(t, p.FixtureRecord(t, "alice/hello").URI)
	alice.Post(t, "a post through the fixture account's client")`),
		// pkgb is the walkthrough of docs/harness.md: an account, a post,
		// its firehose event, the handle resolved, nothing else set up.
		"pkgb/b_test.go": testFile("pkgb", `harness.Main(m)`, `
	fh := p.Firehose(t)
	post := a.Post(t, "hello")
	fh.Require(t, func(e harness.Event) bool { return e.DID == a.DID && e.HasOp("create", "app.bsky.feed.post/") })
	p.RequireRecord(t, post.URI)
	if ident, err := p.Directory().LookupHandle(t.Context(), a.Handle); err != nil || ident.DID != a.DID {
		t.Fatalf("LookupHandle(%s) = %v, %v", a.Handle, ident, err)
	}`),
	}
	for name, content := range files {
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	begin := time.Now()
	cmd := fakepds(t, []string{"PROOF_DIR=" + proof, "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off"},
		"exec", "--", goBin, "test", "-count=1", "./...")
	cmd.Dir = mod
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fakepds exec -- go test ./...: %v\n%s", err, out)
	}
	t.Logf("fakepds exec -- go test ./... took %s:\n%s", time.Since(begin).Round(time.Millisecond), out)

	var urls, dids []string
	for _, pkg := range []string{"pkga", "pkgb"} {
		b, err := os.ReadFile(filepath.Join(proof, pkg))
		if err != nil {
			t.Fatalf("%s did not report: %v", pkg, err)
		}
		f := strings.Fields(string(b))
		if len(f) != 4 || f[0] == "" || f[0] != f[1] || f[2] != "true" || !strings.HasPrefix(f[3], "did:plc:") {
			t.Fatalf("%s reported %q: want HARNESS_PDS_URL, the same URL from the harness, attached=true, a DID", pkg, b)
		}
		urls, dids = append(urls, f[0]), append(dids, f[3])
	}
	if urls[0] != urls[1] || dids[0] == dids[1] {
		t.Fatalf("packages used %v with accounts %v: want one PDS, two accounts", urls, dids)
	}
}
