package pds

import (
	"testing"
	"time"
)

// A write holds its repo's lock alone: the same DID waits, another DID
// never does, even one that shared a stripe with it when the locks were
// striped by an FNV hash (these two did, of 256).
func TestRepoLocks(t *testing.T) {
	var l repoLocks
	const a, b = "did:plc:stripe68", "did:plc:stripe82"
	unlockA := l.lock(a)

	other := make(chan func())
	go func() { other <- l.lock(b) }()
	select {
	case unlockB := <-other:
		unlockB()
	case <-time.After(10 * time.Second):
		t.Fatal("a write to another repo waited for this one's lock")
	}

	same := make(chan func())
	go func() { same <- l.lock(a) }()
	select {
	case <-same:
		t.Fatal("two writes to one repo held its lock at once")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	(<-same)()
	if n := len(l.m); n != 0 {
		t.Fatalf("%d locks kept with no write under way", n)
	}
}
