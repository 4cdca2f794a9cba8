package faults_test

import (
	"testing"

	"github.com/fakepds/fakepds/pds/faults"
)

func TestTake(t *testing.T) {
	var f faults.Faults
	f.Add(faults.Rule{Method: "a.b.c", Times: 2, Status: 500, Error: "InternalServerError"})
	f.Add(faults.Rule{Method: "*", Times: 1, Status: 429, Error: "RateLimitExceeded"})
	for i, want := range []int{500, 500, 429, 0} {
		r, ok := f.Take("a.b.c")
		if ok != (want != 0) || r.Status != want {
			t.Fatalf("call %d: %+v %v, want status %d", i, r, ok, want)
		}
	}
	f.Add(faults.Rule{Method: "x.y.z", Status: 503})
	for range 5 {
		if r, ok := f.Take("x.y.z"); !ok || r.Status != 503 {
			t.Fatal("a rule without Times stopped applying")
		}
	}
	f.Clear()
	if _, ok := f.Take("x.y.z"); ok || len(f.Rules()) != 0 {
		t.Fatal("Clear left rules")
	}
}
