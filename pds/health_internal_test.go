package pds

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"
)

// _health answers 503 with the version when the account database does not
// answer, as the reference does.
func TestHealthUnavailable(t *testing.T) {
	s, err := New(Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.accounts.Close()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/xrpc/_health", nil))
	var body map[string]string
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != 503 || body["version"] != Version || body["error"] != "Service Unavailable" {
		t.Fatalf("health with a closed database = %d %v", rec.Code, body)
	}
}
