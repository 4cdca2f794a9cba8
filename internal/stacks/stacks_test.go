package stacks_test

import (
	"sync"
	"testing"
	"time"

	"github.com/fakepds/fakepds/internal/stacks"
)

func parked(ready chan<- struct{}, stop <-chan struct{}) {
	ready <- struct{}{}
	<-stop
}

func TestCount(t *testing.T) {
	ready, stop := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	// Gone before the test returns, so that a later run's counts are its own.
	defer wg.Wait()
	defer close(stop)
	for range 3 {
		wg.Go(func() { parked(ready, stop) })
		<-ready
	}
	if n := stacks.Count("", "stacks_test.parked"); n != 3 {
		t.Fatalf("Count(any state, parked) = %d, want 3", n)
	}
	// A goroutine that has sent on ready may still be running towards its
	// receive: wait for it to park, as every caller of Count does.
	deadline := time.Now().Add(10 * time.Second)
	for stacks.Count("chan receive", "stacks_test.parked") != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Count(chan receive, parked) = %d after 10 s, want 3", stacks.Count("chan receive", "stacks_test.parked"))
		}
		time.Sleep(time.Millisecond)
	}
	if n := stacks.Count("select", "stacks_test.parked"); n != 0 {
		t.Fatalf("Count(select, parked) = %d, want 0", n)
	}
	if n := stacks.Count("", "stacks_test.parked", "no.such.frame"); n != 0 {
		t.Fatalf("Count with a frame no stack has = %d, want 0", n)
	}
}
