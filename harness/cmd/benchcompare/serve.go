package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/env"
)

// serveInProcess is what `fakepds serve` does, in this binary: the same
// pds.Server, so that -cpuprofile profiles the server alone (the client
// runs in the parent process). It prints the ready line and serves until
// SIGTERM, SIGINT or stdin's end, then writes the profile.
func serveInProcess(profile string) error {
	vars, err := env.Read()
	if err != nil {
		return err
	}
	cfg := harness.ServerConfig(vars)
	cfg.Addr = "127.0.0.1:0"
	srv, err := pds.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return errors.Join(err, srv.Close())
	}
	var prof *os.File
	if profile != "none" {
		if prof, err = os.Create(profile); err != nil {
			return errors.Join(err, srv.Close())
		}
		if err := pprof.StartCPUProfile(prof); err != nil {
			return errors.Join(err, srv.Close())
		}
	}
	line, _ := json.Marshal(map[string]any{"url": srv.URL(), "plcUrl": srv.PLCURL(), "adminPassword": srv.AdminPassword(), "fsync": srv.Fsync()})
	fmt.Printf("%s\n", line)

	waitForStop()
	if prof != nil {
		pprof.StopCPUProfile()
		err = prof.Close()
	}
	return errors.Join(err, srv.Close())
}
