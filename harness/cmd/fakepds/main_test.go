package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/pds/env"
)

// The test binary doubles as the fakepds binary when this is set, so the
// tests run the real main, signals and all, without a separate build.
const asMain = "FAKEPDS_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	// Checked first: exec's CMD in these tests is this binary again, and
	// it inherits asMain.
	if len(os.Args) > 2 && os.Args[1] == childArg {
		os.Exit(child(os.Args[2]))
	}
	if os.Getenv(asMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func fakepds(t *testing.T, environ []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1")
	cmd.Env = append(cmd.Env, environ...)
	return cmd
}

func TestServe(t *testing.T) {
	for _, tc := range []struct {
		fsync string
		want  bool
	}{{"", false}, {"1", true}} {
		t.Run("fsync="+tc.fsync, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cmd := fakepds(t, []string{env.Fsync + "=" + tc.fsync, env.AdminPassword + "=pw"}, "serve", "--dir", dir)
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
			if !sc.Scan() {
				t.Fatalf("no JSON line; stderr:\n%s", stderr.String())
			}
			var ready struct {
				URL           string `json:"url"`
				PLCURL        string `json:"plcUrl"`
				AdminPassword string `json:"adminPassword"`
				Fsync         *bool  `json:"fsync"`
				Dir           string `json:"dir"`
				JetstreamURL  string `json:"jetstreamUrl"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ready); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			if !strings.HasPrefix(ready.URL, "http://localhost:") || !strings.HasPrefix(ready.PLCURL, "http://localhost:") ||
				ready.AdminPassword != "pw" || ready.Fsync == nil || *ready.Fsync != tc.want || ready.Dir != dir {
				t.Fatalf("ready line %s", sc.Text())
			}
			// The line is printed only once the server answers.
			resp, err := http.Get(ready.URL + "/xrpc/_health")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("health %d", resp.StatusCode)
			}
			if resp, err := http.Get(ready.PLCURL + "/_health"); err != nil || resp.StatusCode != 200 {
				t.Fatalf("PLC health: %v", err)
			}
			if ready.JetstreamURL != "ws"+strings.TrimPrefix(ready.URL, "http")+"/subscribe" {
				t.Fatalf("jetstreamUrl %q for url %q", ready.JetstreamURL, ready.URL)
			}
			if conn, _, err := websocket.DefaultDialer.Dial(ready.JetstreamURL, nil); err != nil {
				t.Fatalf("Jetstream: %v", err)
			} else {
				conn.Close()
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if sc.Scan() {
				t.Errorf("more than one line on stdout: %q", sc.Text())
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("exit after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
			}
			if _, err := os.Stat(filepath.Join(dir, "account.sqlite")); err != nil {
				t.Fatalf("--dir not kept: %v", err)
			}
		})
	}
}

func TestBadFsyncValueFailsStartup(t *testing.T) {
	out, err := fakepds(t, []string{env.Fsync + "=true"}, "serve").CombinedOutput()
	if err == nil {
		t.Fatalf("started with HARNESS_PDS_FSYNC=true:\n%s", out)
	}
	if !strings.Contains(string(out), env.Fsync) || !strings.Contains(string(out), "accepted values") {
		t.Fatalf("error does not name the variable and its values:\n%s", out)
	}
}

// HARNESS_PDS_ACTOR_STORE_CACHE and --actor-store-cache reach the Config
// serve and exec start their server with; the flag wins over the variable.
func TestActorStoreCacheReachesConfig(t *testing.T) {
	vars, err := env.Parse(func(k string) (string, bool) {
		if k == env.ActorStoreCache {
			return "1000", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"serve", "exec"} {
		for _, tc := range []struct {
			vars env.Vars
			args []string
			want int
		}{
			{env.Vars{}, nil, 0}, // pds.New's default
			{vars, nil, 1000},
			{env.Vars{}, []string{"--actor-store-cache", "7"}, 7},
			{vars, []string{"--actor-store-cache=7"}, 7},
		} {
			s, fs := newServer(cmd, tc.vars, io.Discard)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if s.cfg.ActorStoreCache != tc.want {
				t.Errorf("%s %q with %s=%d: ActorStoreCache %d, want %d", cmd, tc.args, env.ActorStoreCache, tc.vars.ActorStoreCache, s.cfg.ActorStoreCache, tc.want)
			}
		}
		for _, bad := range []string{"0", "-1", "lots"} {
			var stderr bytes.Buffer
			_, fs := newServer(cmd, env.Vars{}, &stderr)
			if err := fs.Parse([]string{"--actor-store-cache", bad}); err == nil || !strings.Contains(stderr.String(), "positive integer") {
				t.Errorf("%s --actor-store-cache %s: err %v, stderr %q", cmd, bad, err, stderr.String())
			}
		}
	}
}

func TestHelpListsEveryVariable(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	for _, v := range env.Table {
		if !strings.Contains(out.String(), v.Name) {
			t.Errorf("--help lacks %s", v.Name)
		}
	}
}

// The README's table and the docs name every variable too: one source of
// truth (env.Table), checked rather than trusted.
func TestDocsListEveryVariable(t *testing.T) {
	for _, f := range []string{"../../../README.md", "../../../docs/development.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range env.Table {
			if !bytes.Contains(b, []byte(v.Name)) {
				t.Errorf("%s does not document %s", f, v.Name)
			}
			// Its table row gives the same default as --help.
			for line := range strings.Lines(string(b)) {
				if strings.HasPrefix(line, "| `"+v.Name+"` |") && !strings.Contains(line, "| "+v.Default+" |") && !strings.Contains(line, "| `"+v.Default+"` |") {
					t.Errorf("%s: the row of %s does not give its default %q: %s", f, v.Name, v.Default, line)
				}
			}
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &out); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}

// startServe runs `fakepds serve args...` and returns the command (stopped
// by SIGTERM at cleanup) and its first stdout line.
func startServe(t *testing.T, environ []string, args ...string) (*exec.Cmd, *bufio.Scanner, *bytes.Buffer) {
	t.Helper()
	cmd := fakepds(t, environ, append([]string{"serve"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	return cmd, bufio.NewScanner(stdout), stderr
}

// stop ends a serve with SIGTERM and checks it exits 0.
func stop(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\nstderr:\n%s", err, stderr)
	}
}

// serveReady starts serve with args and reads its JSON line.
func serveReady(t *testing.T, args ...string) (Ready, *exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd, sc, stderr := startServe(t, nil, args...)
	if !sc.Scan() {
		t.Fatalf("no JSON line; stderr:\n%s", stderr)
	}
	var r Ready
	if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
		t.Fatalf("line %q: %v", sc.Text(), err)
	}
	return r, cmd, stderr
}

const socialFixture = "../../../fixtures/social/social.json"

// serve --fixtures adds the accounts to the JSON line; a kept --dir
// remembers the fixture, so serving it again loads nothing twice, and
// refuses a fixture that changed.
func TestServeFixtures(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	readyLine := func() (Ready, *exec.Cmd, *bytes.Buffer) {
		t.Helper()
		return serveReady(t, "--dir", dir, "--fixtures", socialFixture)
	}
	first, cmd, stderr := readyLine()
	if len(first.Accounts) != 5 {
		t.Fatalf("accounts %+v", first.Accounts)
	}
	for i, name := range []string{"alice", "bob", "carol", "dan", "eve"} {
		a := first.Accounts[i]
		if a.Name != name || a.Handle != name+".test" || !strings.HasPrefix(a.DID, "did:plc:") || a.Password != name+"-pass" {
			t.Fatalf("account %d: %+v", i, a)
		}
	}
	// The accounts are there when the line is printed.
	out, err := comatproto.IdentityResolveHandle(t.Context(), atclient.NewAPIClient(first.URL), "carol.test")
	if err != nil || out.Did != first.Accounts[2].DID {
		t.Fatalf("resolveHandle carol.test = %+v, %v", out, err)
	}
	stop(t, cmd, stderr)

	again, cmd, stderr := readyLine()
	if again.Accounts[0].DID != first.Accounts[0].DID || again.Accounts[4].DID != first.Accounts[4].DID {
		t.Fatalf("second serve of the dir: %+v, first: %+v", again.Accounts, first.Accounts)
	}
	stop(t, cmd, stderr)

	changed := filepath.Join(t.TempDir(), "social.json")
	b, err := os.ReadFile(socialFixture)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changed, bytes.Replace(b, []byte("Alice"), []byte("Alicia"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out2, err := fakepds(t, nil, "serve", "--dir", dir, "--fixtures", changed).CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "differs: remove the data dir or use another") {
		t.Fatalf("serve of a changed fixture into the same dir: %v\n%s", err, out2)
	}
}

func TestServeFixtureErrors(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"accounts": [{"handle": "alice"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := fakepds(t, nil, "serve", "--fixtures", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), bad+": accounts[0] (alice): password: required") {
		t.Fatalf("serve --fixtures bad.json: %v\n%s", err, out)
	}
}

// serve --env prints lines a shell can source, ending with the marker.
func TestServeEnv(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to source the lines with")
	}
	// A password with a quote in it survives the quoting.
	const pw = `it's "quoted" $HOME`
	cmd, sc, stderr := startServe(t, []string{env.AdminPassword + "=" + pw}, "--env", "--fixtures", socialFixture)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == readyMarker {
			break
		}
	}
	if len(lines) == 0 || lines[len(lines)-1] != readyMarker {
		t.Fatalf("no %q line: %q\nstderr:\n%s", readyMarker, lines, stderr)
	}
	if !strings.HasPrefix(lines[0], "export "+env.URL+"='http://localhost:") || !slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "# account alice: handle alice.test, did did:plc:")
	}) {
		t.Fatalf("lines:\n%s", strings.Join(lines, "\n"))
	}
	file := filepath.Join(t.TempDir(), "pds.env")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command("sh", "-c", `. "$1" && printf '%s\n%s\n%s' "$HARNESS_PDS_URL" "$HARNESS_PDS_PLC_URL" "$HARNESS_PDS_ADMIN_PASSWORD"`, "sh", file).Output()
	if err != nil {
		t.Fatal(err)
	}
	vals := strings.Split(string(got), "\n")
	if len(vals) != 3 || vals[2] != pw {
		t.Fatalf("sourced: %q", vals)
	}
	if resp, err := http.Get(vals[0] + "/xrpc/_health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health of %s: %v", vals[0], err)
	}
	if resp, err := http.Get(vals[1] + "/_health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health of PLC %s: %v", vals[1], err)
	}
	stop(t, cmd, stderr)
}

// make run's addresses name a host, not an IP literal: the server
// publishes the host as given and indigo's relay refuses an IP's URL;
// the README's make run line says the URL it gets.
func TestMakeRunPublishesAHostname(t *testing.T) {
	mk, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{}
	for line := range strings.Lines(string(mk)) {
		if name, val, ok := strings.Cut(strings.TrimSpace(line), " ?= "); ok && (name == "ADDR" || name == "PLC_ADDR") {
			defaults[name] = val
		}
	}
	for _, name := range []string{"ADDR", "PLC_ADDR"} {
		host, _, err := net.SplitHostPort(defaults[name])
		if err != nil {
			t.Fatalf("Makefile %s ?= %q: %v", name, defaults[name], err)
		}
		if net.ParseIP(host) != nil {
			t.Errorf("Makefile %s ?= %s: an IP literal, which a relay refuses in a PDS's URL", name, defaults[name])
		}
	}
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "make run    # a PDS on http://" + defaults["ADDR"] + " "; !strings.Contains(string(readme), want) {
		t.Errorf("README.md lacks %q", want)
	}
}

// serve --plc uses another server's PLC directory: its plcUrl is that
// one, the second server's fixture DIDs are registered there, naming the
// second server; --plc with --plc-addr is refused.
func TestServeSharedPLC(t *testing.T) {
	t.Parallel()
	ready := func(args ...string) Ready {
		t.Helper()
		r, _, _ := serveReady(t, args...)
		return r
	}
	first := ready()
	second := ready("--plc", first.PLCURL, "--fixtures", socialFixture)
	if second.PLCURL != first.PLCURL {
		t.Fatalf("second plcUrl %q, want the first's %q", second.PLCURL, first.PLCURL)
	}
	ident, err := (&identity.BaseDirectory{PLCURL: first.PLCURL}).LookupDID(t.Context(), syntax.DID(second.Accounts[0].DID))
	if err != nil || ident.PDSEndpoint() != second.URL {
		t.Fatalf("the second server's alice through the first's PLC: %+v %v, want PDS %s", ident, err, second.URL)
	}
	out, err := fakepds(t, nil, "serve", "--plc", first.PLCURL, "--plc-addr", "localhost:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--plc and --plc-addr") {
		t.Fatalf("serve --plc --plc-addr: %v\n%s", err, out)
	}
}

// serve --seed N: the fixture's DIDs and the admin password are the same
// on every run of one seed, and another seed's differ.
func TestServeSeed(t *testing.T) {
	t.Parallel()
	ready := func(seed string) Ready {
		t.Helper()
		r, cmd, stderr := serveReady(t, "--seed", seed, "--fixtures", socialFixture)
		stop(t, cmd, stderr)
		return r
	}
	a, b, other := ready("7"), ready("7"), ready("8")
	if a.AdminPassword != b.AdminPassword || other.AdminPassword == a.AdminPassword {
		t.Errorf("admin passwords %q, %q, seed 8 %q", a.AdminPassword, b.AdminPassword, other.AdminPassword)
	}
	for i := range a.Accounts {
		if a.Accounts[i].DID != b.Accounts[i].DID || a.Accounts[i].DID == other.Accounts[i].DID {
			t.Errorf("%s: seed 7 %s then %s, seed 8 %s", a.Accounts[i].Name, a.Accounts[i].DID, b.Accounts[i].DID, other.Accounts[i].DID)
		}
	}
	if out, err := fakepds(t, nil, "serve", "--seed", "-1").CombinedOutput(); err == nil || !strings.Contains(string(out), "want an unsigned integer") {
		t.Errorf("--seed -1: %v\n%s", err, out)
	}
}
