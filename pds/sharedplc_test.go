package pds_test

import (
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds"
)

// Config.PLCURL must be a directory's http(s) URL; New says which field
// is wrong rather than failing at the first resolution.
func TestConfigPLCURLRefusesWhatIsNoURL(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"localhost:2582", "ftp://localhost:2582", "http://", "http://localhost:2582?x=1"} {
		s, err := pds.New(pds.Config{PLCURL: bad})
		if err == nil {
			s.Close()
			t.Errorf("New(PLCURL %q): no error", bad)
			continue
		}
		if !strings.Contains(err.Error(), "Config.PLCURL") {
			t.Errorf("New(PLCURL %q): %v, want it to name Config.PLCURL", bad, err)
		}
	}
	s := start(t, pds.Config{PLCURL: "http://localhost:1/"})
	if s.PLCURL() != "http://localhost:1" {
		t.Errorf("PLCURL() = %q, want the URL without its trailing slash", s.PLCURL())
	}
}
