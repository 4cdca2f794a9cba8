// Command fakepds runs an AT Protocol PDS for tests.
//
//	fakepds serve [--addr HOST:PORT] [--plc-addr HOST:PORT] [--dir DIR]
//
// Once the server answers, serve prints exactly one JSON line on stdout
// (see docs/development.md: tools in other languages rely on it) and runs
// until SIGINT or SIGTERM, then shuts down and exits 0. Logs go to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/env"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := serve(ctx, args[1:], stdout, stderr); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintln(stderr, "fakepds:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "fakepds: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// Ready is the JSON line serve prints once the server answers. Its fields
// are a stable interface: add, never rename or remove.
type Ready struct {
	URL           string `json:"url"`
	PLCURL        string `json:"plcUrl"`
	AdminPassword string `json:"adminPassword"`
	Fsync         bool   `json:"fsync"`
	Dir           string `json:"dir"`
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	vars, err := env.Read()
	if err != nil {
		return err
	}
	cfg := harness.ServerConfig(vars)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address HOST:PORT (default 127.0.0.1:0, or "+env.Addr+")")
	fs.StringVar(&cfg.PLCAddr, "plc-addr", cfg.PLCAddr, "listen address of the PLC directory (default 127.0.0.1:0)")
	fs.StringVar(&cfg.DataDir, "dir", cfg.DataDir, "data directory, kept after exit (default: a temporary one, removed; or "+env.Dir+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}

	srv, err := pds.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		return err
	}
	line, _ := json.Marshal(Ready{URL: srv.URL(), PLCURL: srv.PLCURL(), AdminPassword: srv.AdminPassword(), Fsync: srv.Fsync(), Dir: srv.DataDir()})
	fmt.Fprintf(stdout, "%s\n", line)

	<-ctx.Done()
	return srv.Close()
}

func usage(w io.Writer) {
	fmt.Fprint(w, `fakepds: an AT Protocol PDS for tests

Usage:
  fakepds serve [--addr HOST:PORT] [--plc-addr HOST:PORT] [--dir DIR]
      Serve until SIGINT or SIGTERM. Once the server answers, print one JSON
      line on stdout: {"url", "plcUrl", "adminPassword", "fsync", "dir"}.
      Logs go to stderr.
  fakepds help
      This text.

Environment:
`)
	for _, v := range env.Table {
		fmt.Fprintf(w, "  %s (default: %s)\n      %s\n", v.Name, v.Default, wrap(v.Meaning, 72, "      "))
	}
}

func wrap(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		if i > 0 {
			if n+1+len(word) > width {
				b.WriteString("\n" + indent)
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
