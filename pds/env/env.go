// Package env reads the HARNESS_PDS_* environment variables. It is the only
// place in fakepds that looks at them: the binary and the harness call Read,
// and the pds library itself takes everything through its Config.
package env

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// Prefix starts the name of every variable fakepds reads.
const Prefix = "HARNESS_PDS_"

// Names of the variables, for messages and docs.
const (
	Fsync           = "HARNESS_PDS_FSYNC"
	URL             = "HARNESS_PDS_URL"
	PLCURL          = "HARNESS_PDS_PLC_URL"
	AdminPassword   = "HARNESS_PDS_ADMIN_PASSWORD"
	Dir             = "HARNESS_PDS_DIR"
	Backend         = "HARNESS_PDS_BACKEND"
	Stats           = "HARNESS_PDS_STATS"
	Log             = "HARNESS_PDS_LOG"
	Addr            = "HARNESS_PDS_ADDR"
	ActorStoreCache = "HARNESS_PDS_ACTOR_STORE_CACHE"
)

// Var documents one variable; Table lists them all, in the order --help
// prints them.
type Var struct {
	Name    string
	Default string
	Meaning string
}

// Table is the documentation of every variable, shared by `fakepds --help`
// and the README so the two cannot drift apart silently (a test compares them).
var Table = []Var{
	{Fsync, "0", "1: every SQLite database and blob file is durable (synchronous=FULL, fsync on commit), as a production PDS. Unset, empty or 0: nothing waits on the disk (synchronous=OFF). Any other value is a startup error."},
	{URL, "unset", "Attach to the PDS running at this URL instead of starting one (shared by many test binaries in CI)."},
	{PLCURL, "unset", "With HARNESS_PDS_URL: the PLC directory that PDS uses."},
	{AdminPassword, "random", "Admin password (HTTP Basic, user \"admin\") of the PDS started, or of the one attached to."},
	{Dir, "temporary", "Data directory. When set, it is used and kept after the server closes; otherwise a temporary one is removed on close."},
	{Backend, "inprocess", "Which PDS the harness starts: inprocess, reference (npm @atproto/pds) or docker; the last two where the test binary imports harness/backend/reference or harness/backend/docker."},
	{Stats, "0", "1: print per-method server-side stats (count, p50, p95, mean) when the test binary ends."},
	{Log, "warn", "Server log level on stderr: debug, info or warn. Unset: warn (warnings and errors only)."},
	{Addr, "localhost:0", "Listen address (HOST:PORT) of the server the binary or harness starts. Its URL names this host as given (a name stays a name); unset, a free loopback port named http://localhost:PORT, which relays accept."},
	{ActorStoreCache, "256", "How many actor stores (one SQLite file per account) the server the binary or harness starts keeps open at once. Past it, the least recently used idle one is closed; when all are in use, a request for another account waits for one and answers 503 NotEnoughResources after 10 s. A suite that uses more accounts at a time wants more. A positive integer; unset or empty: 256."},
}

// Vars holds the parsed variables.
type Vars struct {
	Fsync         bool
	URL           string
	PLCURL        string
	AdminPassword string
	Dir           string
	Backend       string
	Stats         bool
	// LogLevel is nil when HARNESS_PDS_LOG is unset: the server stays quiet
	// but for warnings.
	LogLevel *slog.Level
	Addr     string
	// ActorStoreCache is 0 when HARNESS_PDS_ACTOR_STORE_CACHE is unset:
	// the server's default.
	ActorStoreCache int
}

// Read parses the process environment.
func Read() (Vars, error) { return Parse(os.LookupEnv) }

// Parse parses the variables found through lookup. Errors name the variable
// and the values it accepts.
func Parse(lookup func(string) (string, bool)) (Vars, error) {
	get := func(name string) string { v, _ := lookup(name); return strings.TrimSpace(v) }
	var v Vars
	var err error
	if v.Fsync, err = parseBool(Fsync, get(Fsync)); err != nil {
		return Vars{}, err
	}
	if v.Stats, err = parseBool(Stats, get(Stats)); err != nil {
		return Vars{}, err
	}
	v.URL = get(URL)
	v.PLCURL = get(PLCURL)
	for name, u := range map[string]string{URL: v.URL, PLCURL: v.PLCURL} {
		if err := checkURL(name, u); err != nil {
			return Vars{}, err
		}
	}
	v.AdminPassword = get(AdminPassword)
	v.Dir = get(Dir)
	v.Addr = get(Addr)
	if n := get(ActorStoreCache); n != "" {
		if v.ActorStoreCache, err = strconv.Atoi(n); err != nil || v.ActorStoreCache < 1 {
			return Vars{}, fmt.Errorf("%s=%q: accepted values are a positive integer, empty or unset (256)", ActorStoreCache, n)
		}
	}
	switch b := get(Backend); b {
	case "", "inprocess", "reference", "docker":
		v.Backend = b
		if b == "" {
			v.Backend = "inprocess"
		}
	default:
		return Vars{}, fmt.Errorf("%s=%q: accepted values are inprocess, reference, docker", Backend, b)
	}
	switch l := strings.ToLower(get(Log)); l {
	case "":
	case "debug", "info", "warn":
		var lvl slog.Level
		_ = lvl.UnmarshalText([]byte(l))
		v.LogLevel = &lvl
	default:
		return Vars{}, fmt.Errorf("%s=%q: accepted values are debug, info, warn (or unset)", Log, l)
	}
	return v, nil
}

// checkURL accepts unset or an http(s) URL with a host: a bare HOST:PORT
// would otherwise fail every test with a URL parse error.
func checkURL(name, s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s=%q: want the PDS's base URL, http://HOST:PORT or https://HOST", name, s)
	}
	return nil
}

// parseBool accepts exactly unset, empty, "0" and "1": a toggle that decides
// whether data survives a power cut must not guess what "yes" or "true" meant.
func parseBool(name, s string) (bool, error) {
	switch s {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("%s=%q: accepted values are 1 (on), 0, empty or unset (off)", name, s)
}
