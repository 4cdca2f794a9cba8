// Package docker is the harness's docker backend: the official PDS image
// (ghcr.io/bluesky-social/pds), pinned, run through dockertest. Import it
// for its side effect to make HARNESS_PDS_BACKEND=docker and
// harness.NewBackend(t, "docker") work in a test binary:
//
//	import _ "github.com/fakepds/fakepds/harness/backend/docker"
//
// It lives apart from package harness so that a test binary that does
// not import it links none of the Docker client.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/pds/env"
	"github.com/fakepds/fakepds/pds/plc"
	"github.com/fakepds/fakepds/pds/store"
)

func init() { harness.RegisterBackend("docker", start) }

// The docker backend runs the official PDS image, pinned, in dev mode, with
// its PLC pointed at a fake PLC directory served by this process (package
// plc) and SQLite at synchronous=OFF unless HARNESS_PDS_FSYNC=1, as the
// reference backend runs. It needs a Docker engine (DOCKER_HOST or the
// default socket); without one it is harness.ErrBackendUnavailable.

// The image the docker backend runs. 0.4.219 is the newest release of
// github.com/bluesky-social/pds when this was pinned; it bundles
// @atproto/pds 0.4.219, older than the npm reference (see
// scripts/reference-pds/package.json).
const (
	Image = "ghcr.io/bluesky-social/pds"
	Tag   = "0.4.219"
)

const (
	// dockerPatchDir is where the synchronous=OFF patch is mounted.
	dockerPatchDir = "/fakepds"
	// dockerPatchFile is the patch's name in it.
	dockerPatchFile = "sync-off.cjs"
	// dockerExpire removes the container even if this process never
	// does (killed before its cleanup): longer than any conformance run.
	dockerExpire = 30 * 60
	// dockerReadyTimeout bounds the wait for /xrpc/_health once the
	// container runs (the image pull happens before).
	dockerReadyTimeout = 2 * time.Minute
)

// dockerSyncOff is loaded by Node before the image's index.js
// (NODE_OPTIONS=--require). The image's @atproto/pds is CommonJS and
// opens every SQLite database through the static Database.sqlite, looked
// up at call time: wrapping it reaches the account manager, the sequencer,
// the did cache and every actor store, as scripts/reference-pds/launch.mjs
// does for the npm reference. The sequencer passes its pragmas as the
// whole options object, so keep what is passed and only add synchronous.
const dockerSyncOff = `'use strict'
// fakepds harness: SQLite synchronous=OFF for the PDS in this container.
const { createRequire } = require('node:module')
const req = createRequire('/app/index.js')
const { Database } = req('@atproto/pds')
if (typeof Database?.sqlite !== 'function') {
  throw new Error('fakepds: @atproto/pds no longer exports Database.sqlite: the synchronous=OFF patch cannot be applied')
}
const orig = Database.sqlite
Database.sqlite = function (location, opts) {
  const o = opts && typeof opts === 'object' ? opts : {}
  return orig.call(this, location, { ...o, pragmas: { ...(o.pragmas ?? {}), synchronous: 'OFF' } })
}
process.stderr.write('[fakepds] SQLite synchronous=OFF patch applied\n')
`

// dockerParams are the choices a docker backend run is made of.
type dockerParams struct {
	Image, Tag string
	// HostPort is the port the PDS listens on inside the container and
	// is published on at 127.0.0.1: the same number, because in dev mode
	// the PDS's public URL (in every DID document it writes) is
	// http://localhost:PDS_PORT, which then works from the host.
	HostPort int
	// PLCURL is the fake PLC as the container reaches it.
	PLCURL string
	// AdminPassword, JWTSecret, RotationKeyHex (a k256 private key in
	// hex) and RecoveryDIDKey are the PDS's secrets.
	AdminPassword, JWTSecret, RotationKeyHex, RecoveryDIDKey string
	// PatchDir is the host directory holding dockerPatchFile.
	PatchDir string
	// Fsync keeps the stock durability: no patch.
	Fsync bool
	// Log turns the PDS's own logs on (HARNESS_PDS_LOG).
	Log bool
}

// dockerRunOptions is the container's configuration: environment, mounts,
// ports and command. The environment mirrors what @atproto/dev-env gives
// the npm reference (TestPds): dev mode, handles under .test and
// .example, invites off, rate limits off, appview and moderation services
// at unreachable .invalid hosts, SSRF protection off.
func dockerRunOptions(p dockerParams) *dockertest.RunOptions {
	port := strconv.Itoa(p.HostPort)
	envm := map[string]string{
		"PDS_DEV_MODE":       "true",
		"PDS_PORT":           port,
		"PDS_HOSTNAME":       "localhost",
		"PDS_DID_PLC_URL":    p.PLCURL,
		"PDS_ADMIN_PASSWORD": p.AdminPassword,
		"PDS_JWT_SECRET":     p.JWTSecret,
		"PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX": p.RotationKeyHex,
		"PDS_RECOVERY_DID_KEY":                      p.RecoveryDIDKey,
		"PDS_DATA_DIRECTORY":                        "/pds",
		"PDS_BLOBSTORE_DISK_LOCATION":               "/pds/blocks",
		"PDS_SERVICE_HANDLE_DOMAINS":                ".test,.example",
		"PDS_INVITE_REQUIRED":                       "false",
		"PDS_RATE_LIMITS_ENABLED":                   "false",
		"PDS_DISABLE_SSRF_PROTECTION":               "true",
		"PDS_BSKY_APP_VIEW_URL":                     "https://appview.invalid",
		"PDS_BSKY_APP_VIEW_DID":                     "did:example:invalid",
		"PDS_MOD_SERVICE_URL":                       "https://moderator.invalid",
		"PDS_MOD_SERVICE_DID":                       "did:example:invalid",
		"PDS_SERVICE_NAME":                          "Development PDS",
		"LOG_ENABLED":                               strconv.FormatBool(p.Log),
	}
	if !p.Fsync {
		envm["NODE_OPTIONS"] = "--require=" + dockerPatchDir + "/" + dockerPatchFile
	}
	envv := make([]string, 0, len(envm))
	for k, v := range envm {
		envv = append(envv, k+"="+v)
	}
	sort.Strings(envv)
	o := &dockertest.RunOptions{
		Repository:   p.Image,
		Tag:          p.Tag,
		Env:          envv,
		Cmd:          []string{"node", "--enable-source-maps", "index.js"}, // the image's own
		ExposedPorts: []string{port + "/tcp"},
		PortBindings: map[dc.Port][]dc.PortBinding{
			dc.Port(port + "/tcp"): {{HostIP: "127.0.0.1", HostPort: port}},
		},
		// The fake PLC runs on the host; host-gateway reaches it on Linux
		// engines as Docker Desktop does by default.
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Labels:     map[string]string{"org.fakepds.harness": "docker-backend"},
	}
	if !p.Fsync {
		o.Mounts = []string{p.PatchDir + ":" + dockerPatchDir + ":ro"}
	}
	return o
}

// dockerEngine connects to the Docker engine, or says why it cannot.
func dockerEngine() (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("%w: no Docker engine reachable: %v", harness.ErrBackendUnavailable, err)
	}
	if err := pool.Client.Ping(); err != nil {
		return nil, fmt.Errorf("%w: no Docker engine reachable at %s: %v", harness.ErrBackendUnavailable, pool.Client.Endpoint(), err)
	}
	return pool, nil
}

// startDocker starts the fake PLC, then the container, and waits for
// /xrpc/_health.
func start(vars env.Vars, logger *slog.Logger) (p *harness.PDS, err error) {
	pool, err := dockerEngine()
	if err != nil {
		return nil, err
	}
	var cleanups []func() error
	cleanup := func() error {
		var errs []error
		for i := len(cleanups) - 1; i >= 0; i-- {
			errs = append(errs, cleanups[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, cleanup())
		}
	}()

	dir, err := os.MkdirTemp("", "fakepds-docker-")
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() error { return os.RemoveAll(dir) })
	patchDir := filepath.Join(dir, "patch")
	if err := os.MkdirAll(patchDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(patchDir, dockerPatchFile), []byte(dockerSyncOff), 0o644); err != nil {
		return nil, err
	}

	// The fake PLC listens on every interface: the container reaches the
	// host through its bridge, not through loopback.
	dirPLC, err := plc.Open(context.Background(), filepath.Join(dir, "plc"), plc.Options{Store: store.Options{Fsync: vars.Fsync}, NoRateLimit: true})
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, dirPLC.Close)
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		return nil, err
	}
	plcSrv := &http.Server{Handler: dirPLC.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go plcSrv.Serve(ln)
	cleanups = append(cleanups, plcSrv.Close)
	plcPort := ln.Addr().(*net.TCPAddr).Port

	hostPort, err := freePort()
	if err != nil {
		return nil, err
	}
	key, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		return nil, err
	}
	recovery, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		return nil, err
	}
	recoveryPub, err := recovery.PublicKey()
	if err != nil {
		return nil, err
	}
	admin := vars.AdminPassword
	if admin == "" {
		admin = randomHex(16)
	}
	params := dockerParams{
		Image: Image, Tag: Tag,
		HostPort:       hostPort,
		PLCURL:         "http://host.docker.internal:" + strconv.Itoa(plcPort),
		AdminPassword:  admin,
		JWTSecret:      randomHex(32),
		RotationKeyHex: hex.EncodeToString(key.Bytes()),
		RecoveryDIDKey: recoveryPub.DIDKey(),
		PatchDir:       patchDir,
		Fsync:          vars.Fsync,
		Log:            vars.LogLevel != nil,
	}
	res, err := pool.RunWithOptions(dockerRunOptions(params), func(hc *dc.HostConfig) {
		hc.AutoRemove = true
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
	})
	if err != nil {
		return nil, fmt.Errorf("docker backend: run %s:%s: %w", Image, Tag, err)
	}
	cleanups = append(cleanups, func() error { return pool.Purge(res) })
	if err := res.Expire(dockerExpire); err != nil {
		return nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(hostPort)
	pool.MaxWait = dockerReadyTimeout
	client := &http.Client{Timeout: 5 * time.Second}
	if err := pool.Retry(func() error {
		resp, err := client.Get(url + "/xrpc/_health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("_health: %s", resp.Status)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("docker backend: container %s did not answer /xrpc/_health: %w", res.Container.ID, err)
	}
	if logger != nil {
		logger.Info("docker PDS ready", "image", Image+":"+Tag, "url", url, "container", res.Container.ID)
	}
	return harness.Started(url, "http://127.0.0.1:"+strconv.Itoa(plcPort), admin, cleanup), nil
}

// freePort is a TCP port free on 127.0.0.1 right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
