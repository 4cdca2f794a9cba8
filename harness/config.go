package harness

import (
	"log/slog"
	"os"

	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/env"
)

// ServerConfig turns the HARNESS_PDS_* variables into the Config of a
// server to start.
func ServerConfig(v env.Vars) pds.Config {
	cfg := pds.Config{
		Addr:            v.Addr,
		DataDir:         v.Dir,
		Fsync:           v.Fsync,
		AdminPassword:   v.AdminPassword,
		ActorStoreCache: v.ActorStoreCache,
	}
	if v.LogLevel != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: *v.LogLevel}))
	}
	return cfg
}
