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

func TestFsync(t *testing.T) {
	for _, tc := range []struct {
		set   bool
		value string
		want  bool
		bad   bool
	}{
		{set: false, want: false},
		{set: true, value: "", want: false},
		{set: true, value: "0", want: false},
		{set: true, value: " 1 ", want: true},
		{set: true, value: "1", want: true},
		{set: true, value: "true", bad: true},
		{set: true, value: "yes", bad: true},
		{set: true, value: "2", bad: true},
		{set: true, value: "off", bad: true},
	} {
		m := map[string]string{}
		if tc.set {
			m[env.Fsync] = tc.value
		}
		v, err := env.Parse(lookup(m))
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), env.Fsync) || !strings.Contains(err.Error(), "accepted values") {
				t.Errorf("%q: err = %v, want one naming %s and its accepted values", tc.value, err, env.Fsync)
			}
			continue
		}
		if err != nil || v.Fsync != tc.want {
			t.Errorf("%q: Fsync = %v, %v; want %v", tc.value, v.Fsync, err, tc.want)
		}
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
	for _, tc := range []struct {
		value string // "unset": not in the environment
		want  int
		bad   bool
	}{
		{value: "unset", want: 0},
		{value: "", want: 0},
		{value: " 1000 ", want: 1000},
		{value: "1", want: 1},
		{value: "0", bad: true},
		{value: "-5", bad: true},
		{value: "1e3", bad: true},
		{value: "many", bad: true},
	} {
		m := map[string]string{}
		if tc.value != "unset" {
			m[env.ActorStoreCache] = tc.value
		}
		v, err := env.Parse(lookup(m))
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), env.ActorStoreCache) || !strings.Contains(err.Error(), "positive integer") {
				t.Errorf("%q: err = %v, want one naming %s and its accepted values", tc.value, err, env.ActorStoreCache)
			}
			continue
		}
		if err != nil || v.ActorStoreCache != tc.want {
			t.Errorf("%q: ActorStoreCache = %d, %v; want %d", tc.value, v.ActorStoreCache, err, tc.want)
		}
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
