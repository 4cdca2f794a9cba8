package env_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds/env"
)

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// unset, as a value for parsed, leaves the variable out.
const unset = "\x00unset"

// parsed is what Parse makes of an environment holding name=value alone.
func parsed(t *testing.T, name, value string) env.Vars {
	t.Helper()
	m := map[string]string{}
	if value != unset {
		m[name] = value
	}
	v, err := env.Parse(lookup(m))
	if err != nil {
		t.Fatalf("%s=%q: %v", name, value, err)
	}
	return v
}

// rejects checks that name=value fails Parse with an error naming the
// variable and the values it accepts.
func rejects(t *testing.T, name, value string) {
	t.Helper()
	_, err := env.Parse(lookup(map[string]string{name: value}))
	if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "accepted values") {
		t.Errorf("%s=%q: err = %v, want one naming the variable and its accepted values", name, value, err)
	}
}

func TestFsync(t *testing.T) {
	for value, want := range map[string]bool{unset: false, "": false, "0": false, " 1 ": true, "1": true} {
		if got := parsed(t, env.Fsync, value).Fsync; got != want {
			t.Errorf("%q: Fsync = %v, want %v", value, got, want)
		}
	}
	for _, bad := range []string{"true", "yes", "2", "off"} {
		rejects(t, env.Fsync, bad)
	}
}

func TestDefaultsAndOthers(t *testing.T) {
	v, err := env.Parse(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if v.Backend != "inprocess" || v.LogLevel != nil || v.Stats {
		t.Fatalf("defaults: %+v", v)
	}
	v, err = env.Parse(lookup(map[string]string{
		env.Log: "DEBUG", env.Backend: "reference", env.Stats: "1", env.Dir: "/d", env.URL: "http://x",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if v.LogLevel == nil || *v.LogLevel != slog.LevelDebug || v.Backend != "reference" || !v.Stats || v.Dir != "/d" || v.URL != "http://x" {
		t.Fatalf("parsed: %+v", v)
	}
	for _, kv := range [][2]string{{env.Log, "loud"}, {env.Backend, "k8s"}, {env.Stats, "yes"},
		{env.URL, "127.0.0.1:2583"}, {env.URL, "ftp://x"}, {env.PLCURL, "localhost:2582"}, {env.URL, "http://"}} {
		k, bad := kv[0], kv[1]
		if _, err := env.Parse(lookup(map[string]string{k: bad})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: err = %v", k, bad, err)
		}
	}
}

func TestActorStoreCache(t *testing.T) {
	for value, want := range map[string]int{unset: 0, "": 0, " 1000 ": 1000, "1": 1} {
		if got := parsed(t, env.ActorStoreCache, value).ActorStoreCache; got != want {
			t.Errorf("%q: ActorStoreCache = %d, want %d", value, got, want)
		}
	}
	for _, bad := range []string{"0", "-5", "1e3", "many"} {
		rejects(t, env.ActorStoreCache, bad)
	}
}

func TestTableIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range env.Table {
		if !strings.HasPrefix(v.Name, env.Prefix) || v.Meaning == "" || seen[v.Name] {
			t.Errorf("bad or duplicate entry %+v", v)
		}
		seen[v.Name] = true
	}
	for _, n := range []string{env.Fsync, env.URL, env.PLCURL, env.AdminPassword, env.Dir, env.Backend, env.Stats, env.Log, env.Addr, env.ActorStoreCache} {
		if !seen[n] {
			t.Errorf("Table lacks %s", n)
		}
	}
}
