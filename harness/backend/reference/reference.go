// Package reference is the harness's reference backend: the npm reference
// PDS (@atproto/pds, run by scripts/reference-pds/run.sh from fakepds's
// source tree, after scripts/reference-pds/install.sh). Import it for its
// side effect to make HARNESS_PDS_BACKEND=reference and
// harness.NewBackend(t, "reference") work in a test binary:
//
//	import _ "github.com/fakepds/fakepds/harness/backend/reference"
//
// With HARNESS_PDS_URL set it starts nothing and attaches to that URL (a
// reference PDS some other process runs).
package reference

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/pds/env"
)

func init() { harness.RegisterBackend("reference", start) }

// start attaches to HARNESS_PDS_URL when it is set, or starts the
// launcher.
func start(vars env.Vars, logger *slog.Logger) (*harness.PDS, error) {
	if vars.URL != "" {
		return harness.Attach(vars.URL, vars.PLCURL, vars.AdminPassword), nil
	}
	return startReference(vars, logger)
}

// The reference backend runs scripts/reference-pds/run.sh (npm
// @atproto/pds with an in-memory PLC) as a subprocess. It prints one JSON
// line on stdout when it answers, and stops when its stdin closes: stdin
// is a pipe this process holds, so the launcher goes down with it even
// when the test binary is killed.

// referenceStartTimeout bounds the wait for the launcher's line (Node
// boot, imports, PLC and PDS start: ~2.5 s on our machines).
const referenceStartTimeout = 2 * time.Minute

// referenceReady is the launcher's JSON line.
type referenceReady struct {
	URL           string `json:"url"`
	PLCURL        string `json:"plcUrl"`
	AdminPassword string `json:"adminPassword"`
	Fsync         bool   `json:"fsync"`
	Version       string `json:"version"`
}

// referenceScript is run.sh in this module's source tree.
func referenceScript() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("reference backend: cannot locate the harness's source to find scripts/reference-pds")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "reference-pds", "run.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("reference backend: the reference backend needs fakepds's source tree: %w", err)
	}
	return filepath.Clean(script), nil
}

// referenceCommand is the launcher's command line and environment for
// vars: fsync, admin password and data dir pass through as the launcher
// reads them; HARNESS_PDS_ADDR's port becomes --port.
func referenceCommand(script string, vars env.Vars, environ []string) (args, envv []string, err error) {
	if vars.Addr != "" {
		_, port, err := net.SplitHostPort(vars.Addr)
		if err != nil {
			return nil, nil, fmt.Errorf("reference backend: %s=%q: %w", env.Addr, vars.Addr, err)
		}
		if port != "" && port != "0" {
			args = append(args, "--port", port)
		}
	}
	fsync := "0"
	if vars.Fsync {
		fsync = "1"
	}
	set := map[string]string{env.Fsync: fsync, env.AdminPassword: vars.AdminPassword, env.Dir: vars.Dir}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, ours := set[name]; !ours {
			envv = append(envv, kv)
		}
	}
	for _, name := range []string{env.Fsync, env.AdminPassword, env.Dir} {
		if set[name] != "" {
			envv = append(envv, name+"="+set[name])
		}
	}
	return append([]string{script}, args...), envv, nil
}

// startReference starts the launcher and waits for its line.
func startReference(vars env.Vars, logger *slog.Logger) (*harness.PDS, error) {
	script, err := referenceScript()
	if err != nil {
		return nil, err
	}
	argv, envv, err := referenceCommand(script, vars, os.Environ())
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = envv
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &tail{max: 16 << 10}
	var logw io.Writer = stderr
	if vars.LogLevel != nil {
		logw = io.MultiWriter(stderr, os.Stderr)
	} else if logger != nil {
		logw = io.MultiWriter(stderr, &logLines{l: logger})
	}
	cmd.Stderr = logw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("reference backend: start %s: %w", script, err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil {
			lines <- line
		}
		_, _ = io.Copy(io.Discard, stdout) // nothing else is ever written; keep the pipe drained
		exited <- cmd.Wait()
	}()
	stop := func() error {
		stdin.Close() // the launcher shuts down on EOF
		select {
		case err := <-exited:
			return err
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			return fmt.Errorf("reference backend: the reference PDS did not stop within 20 s of its stdin closing; killed: %v", <-exited)
		}
	}
	fail := func(err error) (*harness.PDS, error) {
		// It watches stdin only once ready: before that, kill it.
		_ = cmd.Process.Kill()
		<-exited
		return nil, err
	}
	var line string
	select {
	case line = <-lines:
	case err := <-exited:
		exited <- err // for stop
		why := ""
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			why = " (not installed: run scripts/reference-pds/install.sh)"
		}
		return fail(fmt.Errorf("reference backend: the reference PDS exited before it was ready: %v%s\n%s", err, why, stderr))
	case <-time.After(referenceStartTimeout):
		return fail(fmt.Errorf("reference backend: the reference PDS was not ready within %s\n%s", referenceStartTimeout, stderr))
	}
	var ready referenceReady
	if err := json.Unmarshal([]byte(line), &ready); err != nil || ready.URL == "" {
		return fail(fmt.Errorf("reference backend: the reference launcher printed %q, not its JSON line: %v", line, err))
	}
	if ready.Fsync != vars.Fsync {
		return fail(fmt.Errorf("reference backend: the reference PDS runs with fsync=%v, %s asked for %v", ready.Fsync, env.Fsync, vars.Fsync))
	}
	if logger != nil {
		logger.Info("reference PDS ready", "url", ready.URL, "plcUrl", ready.PLCURL, "version", ready.Version, "pid", cmd.Process.Pid)
	}
	return harness.Started(ready.URL, ready.PLCURL, ready.AdminPassword, stop), nil
}

// logLines sends a subprocess's output to a logger, a record per line.
// exec.Cmd writes from one goroutine, so it needs no lock.
type logLines struct {
	l    *slog.Logger
	part []byte
}

func (w *logLines) Write(b []byte) (int, error) {
	w.part = append(w.part, b...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.l.Info(string(w.part[:i]))
		w.part = w.part[i+1:]
	}
}

// tail keeps the last bytes written to it: a subprocess's stderr, for the
// error that says why it did not start.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (w *tail) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if len(w.buf) > w.max {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return len(b), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.buf))
}
