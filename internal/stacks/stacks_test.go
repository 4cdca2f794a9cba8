package stacks_test

import (
	"testing"

	"github.com/fakepds/fakepds/internal/stacks"
)

func parked(ready chan<- struct{}, stop <-chan struct{}) {
	ready <- struct{}{}
	<-stop
}

func TestCount(t *testing.T) {
	ready, stop := make(chan struct{}), make(chan struct{})
	defer close(stop)
	for range 3 {
		go parked(ready, stop)
		<-ready
	}
	if n := stacks.Count("chan receive", "stacks_test.parked"); n != 3 {
		t.Fatalf("Count(chan receive, parked) = %d, want 3", n)
	}
	if n := stacks.Count("", "stacks_test.parked"); n != 3 {
		t.Fatalf("Count(any state, parked) = %d, want 3", n)
	}
	if n := stacks.Count("select", "stacks_test.parked"); n != 0 {
		t.Fatalf("Count(select, parked) = %d, want 0", n)
	}
	if n := stacks.Count("", "stacks_test.parked", "no.such.frame"); n != 0 {
		t.Fatalf("Count with a frame no stack has = %d, want 0", n)
	}
}
