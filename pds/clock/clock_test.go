package clock_test

import (
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/clock"
)

func TestShifted(t *testing.T) {
	var c clock.Shifted
	before := time.Now()
	if d := c.Now().Sub(before); d < 0 || d > time.Hour {
		t.Fatalf("zero Shifted is not the real time: off by %v", d)
	}
	c.Advance(3 * time.Hour)
	c.Advance(time.Hour)
	if c.Offset() != 4*time.Hour {
		t.Fatalf("offset %v", c.Offset())
	}
	if got := time.Until(c.Now()); got < 4*time.Hour-time.Minute || got > 4*time.Hour+time.Minute {
		t.Fatalf("Now is %v ahead, want 4h", got)
	}
}

func TestFrozen(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c := clock.NewFrozen(start)
	for range 2 {
		if !c.Now().Equal(start) {
			t.Fatalf("Now %v, want %v", c.Now(), start)
		}
	}
	c.Advance(time.Hour)
	if !c.Now().Equal(start.Add(time.Hour)) || c.Offset() != time.Hour {
		t.Fatalf("after Advance: %v (offset %v)", c.Now(), c.Offset())
	}
}

func TestTIDsIncreaseOnAFrozenClock(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tids := clock.TIDs{Clock: clock.NewFrozen(start)}
	a, b := tids.Next(), tids.Next()
	if !a.Time().Equal(start) || b.Integer() <= a.Integer() {
		t.Fatalf("TIDs %s (%v), %s: want the clock's time, then later", a, a.Time(), b)
	}
	again := clock.TIDs{Clock: clock.NewFrozen(start)}
	if again.Next() != a {
		t.Fatal("one clock, two first TIDs")
	}
}
