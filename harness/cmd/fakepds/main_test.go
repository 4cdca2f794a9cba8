package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fakepds/fakepds/pds/env"
)

// The test binary doubles as the fakepds binary when this is set, so the
// tests run the real main, signals and all, without a separate build.
const asMain = "FAKEPDS_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
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
			}
			if err := json.Unmarshal(sc.Bytes(), &ready); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			if !strings.HasPrefix(ready.URL, "http://127.0.0.1:") || !strings.HasPrefix(ready.PLCURL, "http://127.0.0.1:") ||
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
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &out); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}
