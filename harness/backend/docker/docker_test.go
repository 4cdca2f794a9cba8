package docker

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/harness/internal/backendtest"
)

func TestDockerRunOptions(t *testing.T) {
	p := dockerParams{
		Image: Image, Tag: Tag, HostPort: 41234,
		PLCURL: "http://host.docker.internal:2582", AdminPassword: "adm",
		JWTSecret: "jwt", RotationKeyHex: "ab12", RecoveryDIDKey: "did:key:zQ3sh",
		PatchDir: "/tmp/x/patch",
	}
	o := dockerRunOptions(p)
	if o.Repository != "ghcr.io/bluesky-social/pds" || o.Tag == "" || o.Tag == "latest" {
		t.Errorf("image %s:%s: want the official image at a pinned tag", o.Repository, o.Tag)
	}
	want := []string{
		"PDS_DEV_MODE=true",
		"PDS_PORT=41234", // the PDS's public URL is http://localhost:PDS_PORT
		"PDS_HOSTNAME=localhost",
		"PDS_DID_PLC_URL=http://host.docker.internal:2582",
		"PDS_ADMIN_PASSWORD=adm",
		"PDS_JWT_SECRET=jwt",
		"PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX=ab12",
		"PDS_RECOVERY_DID_KEY=did:key:zQ3sh",
		"PDS_SERVICE_HANDLE_DOMAINS=.test,.example",
		"PDS_INVITE_REQUIRED=false",
		"PDS_RATE_LIMITS_ENABLED=false",
		"PDS_BLOBSTORE_DISK_LOCATION=/pds/blocks",
		"NODE_OPTIONS=--require=/fakepds/sync-off.cjs",
		"LOG_ENABLED=false",
	}
	for _, kv := range want {
		if !slices.Contains(o.Env, kv) {
			t.Errorf("env lacks %s; env: %q", kv, o.Env)
		}
	}
	if !slices.IsSorted(o.Env) {
		t.Errorf("env not sorted (unstable across runs): %q", o.Env)
	}
	if !slices.Equal(o.Mounts, []string{"/tmp/x/patch:/fakepds:ro"}) {
		t.Errorf("mounts %q", o.Mounts)
	}
	if !slices.Equal(o.ExposedPorts, []string{"41234/tcp"}) {
		t.Errorf("exposed ports %q", o.ExposedPorts)
	}
	b := o.PortBindings[dc.Port("41234/tcp")]
	if len(o.PortBindings) != 1 || len(b) != 1 || b[0].HostIP != "127.0.0.1" || b[0].HostPort != "41234" {
		t.Errorf("port bindings %+v: want 41234/tcp on 127.0.0.1:41234 only", o.PortBindings)
	}
	if !slices.Contains(o.ExtraHosts, "host.docker.internal:host-gateway") {
		t.Errorf("extra hosts %q: the container must reach the fake PLC on the host", o.ExtraHosts)
	}
	if !slices.Equal(o.Cmd, []string{"node", "--enable-source-maps", "index.js"}) {
		t.Errorf("cmd %q", o.Cmd)
	}

	// HARNESS_PDS_FSYNC=1: the stock image, unpatched.
	p.Fsync, p.Log = true, true
	o = dockerRunOptions(p)
	for _, kv := range o.Env {
		if strings.HasPrefix(kv, "NODE_OPTIONS=") {
			t.Errorf("fsync on, yet %s", kv)
		}
	}
	if len(o.Mounts) != 0 {
		t.Errorf("fsync on, yet mounts %q", o.Mounts)
	}
	if !slices.Contains(o.Env, "LOG_ENABLED=true") {
		t.Errorf("HARNESS_PDS_LOG set, yet env %q", o.Env)
	}
}

// The patch must be what launch.mjs does to the npm reference: only add
// synchronous to the pragmas, keep everything passed.
func TestDockerSyncOffPatch(t *testing.T) {
	for _, s := range []string{"createRequire('/app/index.js')", "Database.sqlite = function (location, opts)", "...(o.pragmas ?? {}), synchronous: 'OFF'"} {
		if !strings.Contains(dockerSyncOff, s) {
			t.Errorf("patch lacks %q", s)
		}
	}
}

// The patch runs as Node would run it in the container: loaded with
// --require before the app, it wraps the Database.sqlite the app then
// uses. A stub @atproto/pds stands in for the image's.
func TestDockerSyncOffPatchRuns(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node on PATH")
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "node_modules", "@atproto", "pds")
	files := map[string]string{
		filepath.Join(pkg, "package.json"): `{"name": "@atproto/pds", "main": "index.js"}`,
		filepath.Join(pkg, "index.js"):     `exports.Database = class { static sqlite(location, opts) { return opts } }`,
		filepath.Join(dir, "index.js"): `const { Database } = require('@atproto/pds')
console.log(JSON.stringify([Database.sqlite('a', { pragmas: { journal_mode: 'WAL' } }), Database.sqlite('seq', { journal_mode: 'WAL' }), Database.sqlite('b')]))`,
		filepath.Join(dir, dockerPatchFile): strings.Replace(dockerSyncOff, "/app/index.js", filepath.Join(dir, "index.js"), 1),
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(node, "index.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=--require="+filepath.Join(dir, dockerPatchFile))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	want := `[{"pragmas":{"journal_mode":"WAL","synchronous":"OFF"}},{"journal_mode":"WAL","pragmas":{"synchronous":"OFF"}},{"pragmas":{"synchronous":"OFF"}}]`
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("the app opened databases with\n%s\nwant\n%s", got, want)
	}
}

func TestDockerBackend(t *testing.T) {
	t.Parallel()
	// Skips without an engine, saying so: the tests of this package are
	// the docker backend's, not a CI job's proof that it ran.
	backendtest.Exercise(t, harness.NewBackend(t, "docker", harness.SkipUnavailable()))
}

func TestDockerEngineUnavailable(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	_, err := dockerEngine()
	if !errors.Is(err, harness.ErrBackendUnavailable) {
		t.Fatalf("err = %v, want ErrBackendUnavailable", err)
	}
}
