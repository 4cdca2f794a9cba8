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
