package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fakepds/fakepds/pds/env"
	"github.com/fakepds/fakepds/pds/stats"
)

// A server is one started PDS process: fakepds's binary or the npm
// reference, each of which prints one JSON line once it answers.
type server struct {
	name          string
	url           string
	adminPassword string
	cmd           *exec.Cmd
	stdin         io.WriteCloser
	log           *os.File
	// started is process start to the first answer (the ready line, then
	// one _health call answered).
	started time.Duration
}

// startServer runs argv (with extra environment) and waits for its ready
// line. Its logs go to a file in dir, shown when it fails.
func startServer(ctx context.Context, name string, argv []string, extraEnv []string, dir string) (*server, error) {
	logf, err := os.CreateTemp(dir, name+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(childEnv(), extraEnv...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// The reference stops when its stdin closes: it dies with this process.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, stdin: stdin, log: logf}
	type ready struct {
		URL           string `json:"url"`
		AdminPassword string `json:"adminPassword"`
	}
	lines := make(chan ready, 1)
	errc := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		if !sc.Scan() {
			errc <- fmt.Errorf("%s exited before its ready line", name)
			return
		}
		var r ready
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.URL == "" {
			errc <- fmt.Errorf("%s: ready line %q: %v", name, sc.Text(), err)
			return
		}
		lines <- r
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case r := <-lines:
		s.url, s.adminPassword = r.URL, r.AdminPassword
	case err := <-errc:
		return nil, errors.Join(err, s.stop(), s.tail())
	case <-time.After(3 * time.Minute):
		return nil, errors.Join(fmt.Errorf("%s: no ready line in 3 minutes", name), s.stop(), s.tail())
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), s.stop())
	}
	resp, err := http.Get(s.url + "/xrpc/_health")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s: _health: %w", name, err), s.stop())
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s.started = time.Since(start)
	return s, nil
}

// notInherited are the variables that would make a server the tool
// starts attach to another PDS, share a data dir or listen elsewhere: each
// round starts its own, fresh. HARNESS_PDS_FSYNC and _LOG pass through.
var notInherited = []string{env.URL, env.PLCURL, env.AdminPassword, env.Dir, env.Addr, env.Backend, env.Stats}

func childEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(notInherited, name)
	})
}

// tail is the end of the server's log, as an error.
func (s *server) tail() error {
	b, _ := os.ReadFile(s.log.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return fmt.Errorf("%s log (%s):\n%s", s.name, s.log.Name(), b)
}

// stop ends the server with SIGTERM (SIGKILL after 20 s) and waits.
func (s *server) stop() error {
	if s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		err = errors.Join(errors.New(s.name+": did not stop within 20 s of SIGTERM; killed"), <-done)
	}
	s.stdin.Close()
	s.log.Close()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && !exit.Exited() {
			return nil // ended by our signal
		}
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return nil
}

// memory is a process's resident set, from /proc/PID/status.
type memory struct {
	RSS, HWM int64 // bytes: VmRSS now, VmHWM the peak so far
}

func (s *server) memory() (memory, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(s.cmd.Process.Pid), "status"))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for line := range strings.SplitSeq(string(b), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("/proc status %s: %q", name, value)
		}
		*dst = kb << 10
	}
	return m, nil
}

// control calls fakepds's control plane (pds/control.go) as the admin.
func (s *server) control(method, route string, out any) error {
	req, err := http.NewRequest(method, s.url+"/_fakepds/"+route, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth("admin", s.adminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s /_fakepds/%s: HTTP %d: %.200s", method, route, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// serverStats is fakepds's per-method server-side stats, by NSID.
func (s *server) serverStats() (map[string]stats.Method, error) {
	var out struct {
		Methods []stats.Method `json:"methods"`
	}
	if err := s.control(http.MethodGet, "stats", &out); err != nil {
		return nil, err
	}
	m := map[string]stats.Method{}
	for _, x := range out.Methods {
		m[x.Name] = x
	}
	return m, nil
}

func (s *server) resetStats() error { return s.control(http.MethodDelete, "stats", nil) }

// floor is the server that does no work: a child process of this binary
// (so that, like any server, it is another process to wake) answering
// every XRPC method with the bytes fakepds answered it with last (same
// size, same content type). A workload runs against it unchanged and
// measures only the client, loopback HTTP and net/http's server.
type floor struct {
	mu      sync.Mutex
	answers map[string]answer
}

type answer struct {
	contentType string
	body        []byte
}

// floorEnv makes this binary serve as the floor.
const floorEnv = "BENCHCOMPARE_FLOOR"

// keep is a client's record hook: the answers fakepds gave.
func (f *floor) keep(nsid, contentType string, body []byte) {
	f.mu.Lock()
	if f.answers == nil {
		f.answers = map[string]answer{}
	}
	f.answers[nsid] = answer{contentType, append([]byte(nil), body...)}
	f.mu.Unlock()
}

// load gives a started floor server the answers kept so far.
func (f *floor) load(s *server) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for nsid, a := range f.answers {
		req, err := http.NewRequest(http.MethodPut, s.url+"/_floor/"+nsid, bytes.NewReader(a.body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", a.contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("floor: PUT %s: HTTP %d", nsid, resp.StatusCode)
		}
	}
	return nil
}

// serveFloor is the floor process: PUT /_floor/NSID sets an answer,
// /xrpc/NSID gives it.
func serveFloor() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var f floor
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /_floor/{nsid}", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.keep(r.PathValue("nsid"), r.Header.Get("Content-Type"), b)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/xrpc/{nsid}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		a, ok := f.answers[r.PathValue("nsid")]
		f.mu.Unlock()
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotImplemented)
			_, _ = io.WriteString(w, `{"error":"NoAnswer","message":"fakepds did not answer this method first"}`)
			return
		}
		w.Header().Set("Content-Type", a.contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
		_, _ = w.Write(a.body)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf(`{"url":"http://%s"}`+"\n", ln.Addr())
	waitForStop()
	return srv.Close()
}

// waitForStop returns on SIGTERM, SIGINT or the end of stdin (the parent
// died).
func waitForStop() {
	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGTERM, os.Interrupt)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		done <- syscall.SIGHUP
	}()
	<-done
}
