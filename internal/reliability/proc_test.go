package reliability

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fakepds/fakepds/harness"
)

const adminPassword = "reliability-admin"

// proc is a running fakepds binary.
type proc struct {
	*harness.PDS
	cmd    *exec.Cmd
	dir    string
	stderr *lockedBuffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// addrs are a server's listen addresses, kept across restarts so tokens,
// DID documents and clients stay valid.
type addrs struct{ pds, plc string }

func freeAddrs(t testing.TB) addrs {
	t.Helper()
	var a [2]string
	for i := range a {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a[i] = l.Addr().String()
		l.Close()
	}
	return addrs{a[0], a[1]}
}

// start runs `fakepds serve` on dir and returns once it printed its ready
// line. The process is killed when the test ends if it still runs.
func start(t testing.TB, dir string, fsync bool, at addrs) *proc {
	return startBinary(t, binary(t, true), dir, fsync, at)
}

// startBinary is start with the binary given.
func startBinary(t testing.TB, bin, dir string, fsync bool, at addrs) *proc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--dir", dir, "--addr", at.pds, "--plc-addr", at.plc)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HARNESS_PDS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	fs := "0"
	if fsync {
		fs = "1"
	}
	cmd.Env = append(cmd.Env, "HARNESS_PDS_FSYNC="+fs, "HARNESS_PDS_ADMIN_PASSWORD="+adminPassword)
	p := &proc{cmd: cmd, dir: dir, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.exited
		p.checkRaces(t)
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	var ready struct {
		URL    string `json:"url"`
		PLCURL string `json:"plcUrl"`
		Fsync  bool   `json:"fsync"`
	}
	select {
	case l, ok := <-line:
		if !ok {
			<-p.exited
			t.Fatalf("fakepds serve ended before its ready line (%v):\n%s", p.err, p.stderr)
		}
		if err := json.Unmarshal([]byte(l), &ready); err != nil {
			t.Fatalf("ready line %q: %v", l, err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("fakepds serve printed no ready line in 2 minutes:\n%s", p.stderr)
	}
	if ready.Fsync != fsync {
		t.Fatalf("fakepds reports fsync %v, asked %v", ready.Fsync, fsync)
	}
	p.PDS = harness.Attach(ready.URL, ready.PLCURL, adminPassword)
	return p
}

func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill ends the process with SIGKILL: no deferred Close, no checkpoint.
func (p *proc) kill(t testing.TB) {
	t.Helper()
	p.signal(syscall.SIGKILL)
	<-p.exited
	p.checkRaces(t)
}

// stop shuts the process down with SIGTERM and expects exit status 0.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatalf("fakepds did not exit within a minute of SIGTERM")
	}
	p.checkRaces(t)
	if p.err != nil {
		t.Fatalf("fakepds exited with %v:\n%s", p.err, p.stderr)
	}
}

// checkRaces fails t when the race detector reported in the child.
func (p *proc) checkRaces(t testing.TB) {
	t.Helper()
	if s := p.stderr.String(); strings.Contains(s, "WARNING: DATA RACE") {
		t.Errorf("the race detector reported in fakepds:\n%s", s)
	}
}

// lockedBuffer is the child's stderr, written by os/exec's copier and
// read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
