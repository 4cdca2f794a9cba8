package plc_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
	"github.com/fakepds/fakepds/pds/plc"
)

// TestInteropLogs replays the audit logs the reference directory runs as
// its interop tests (testdata/interop) through POST /{did}, the clock set
// to each entry's createdAt. Valid logs must come back identical from
// /log/audit; invalid ones must be refused at their last entry with the
// reference's error.
func TestInteropLogs(t *testing.T) {
	t.Parallel()
	// What the reference's interop.test.ts expects of each invalid log.
	invalid := map[string]struct {
		status int
		prefix string
	}{
		"log_invalid_nullification_reused_key.json": {400, "Invalid signature on op: "},
		"log_invalid_nullification_too_slow.json":   {400, "Recovery operation occurred outside of the allowed 72 hr recovery window"},
		"log_invalid_sig_b64_newline.json":          {500, "Internal Server Error"},
		"log_invalid_sig_b64_padding_bits.json":     {500, "Internal Server Error"},
		"log_invalid_sig_b64_padding_chars.json":    {400, "Invalid signature on op: "},
		"log_invalid_sig_der.json":                  {400, "Invalid signature on op: "},
		"log_invalid_sig_k256_high_s.json":          {400, "Invalid signature on op: "},
		"log_invalid_sig_p256_high_s.json":          {400, "Invalid signature on op: "},
		"log_invalid_update_nullified.json":         {400, "Operations not correctly ordered"},
		"log_invalid_update_tombstoned.json":        {400, "Operations not correctly ordered"},
	}
	files, err := filepath.Glob("testdata/interop/log_*.json")
	if err != nil || len(files) != 19 {
		t.Fatalf("%d interop logs (%v), want 19", len(files), err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Operations stay raw: they are posted byte for byte.
			var entries []struct {
				DID       string          `json:"did"`
				Operation json.RawMessage `json:"operation"`
				CID       string          `json:"cid"`
				Nullified bool            `json:"nullified"`
				CreatedAt string          `json:"createdAt"`
			}
			if err := json.Unmarshal(b, &entries); err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, plc.Options{})
			want, isInvalid := invalid[name]
			for i, e := range entries {
				at, err := syntax.ParseDatetime(e.CreatedAt)
				if err != nil {
					t.Fatal(err)
				}
				f.clock.Set(at.Time())
				res := f.post(t, e.DID, []byte(e.Operation))
				if isInvalid && i == len(entries)-1 {
					if res.status != want.status || !strings.HasPrefix(res.message(t), want.prefix) {
						t.Fatalf("entry %d: %d %s, want %d %q…", i, res.status, res.body, want.status, want.prefix)
					}
					return
				}
				if res.status != 200 {
					t.Fatalf("entry %d: %d %s", i, res.status, res.body)
				}
			}
			if isInvalid {
				t.Fatal("accepted every entry")
			}

			audit, err := f.dir.AuditLog(t.Context(), syntax.DID(entries[0].DID))
			if err != nil {
				t.Fatal(err)
			}
			if len(audit) != len(entries) {
				t.Fatalf("%d entries, want %d", len(audit), len(entries))
			}
			for i, e := range entries {
				g := audit[i]
				at, _ := syntax.ParseDatetime(e.CreatedAt)
				if g.CID != e.CID || g.Nullified != e.Nullified || g.CreatedAt != at.Time().UTC().Format(plc.TimeFormat) {
					t.Errorf("entry %d: {%s %v %s}, want {%s %v %s}", i, g.CID, g.Nullified, g.CreatedAt, e.CID, e.Nullified, e.CreatedAt)
				}
			}
			if err := didplc.VerifyOpLog(audit); err != nil {
				t.Fatalf("go-didplc refuses the rebuilt log: %v", err)
			}
		})
	}
}
