package xrpc_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds/xrpc"
)

func TestDecodeJSON(t *testing.T) {
	type in struct {
		Handle string `json:"handle"`
		Count  int    `json:"count"`
		Nested struct {
			Flag bool `json:"flag"`
		} `json:"nested"`
	}
	for _, tc := range []struct {
		name, ct, body string
		noBody         bool
		limit          int64
		status         int
		errName, msg   string
	}{
		{name: "ok", ct: "application/json", body: `{"handle":"a.test","count":2}`},
		{name: "charset", ct: "application/json; charset=utf-8", body: `{"handle":"a.test"}`},
		{name: "empty body is {}", ct: "application/json", body: ``},
		{name: "missing body", noBody: true, status: 400, errName: "InvalidRequest", msg: "A request body is expected but none was provided"},
		{name: "no content type", body: `{}`, status: 400, errName: "InvalidRequest", msg: "Request encoding (Content-Type) required but not provided"},
		{name: "wrong content type", ct: "text/plain", body: `{}`, status: 400, errName: "InvalidRequest", msg: "Wrong request encoding (Content-Type): text/plain"},
		{name: "syntax", ct: "application/json", body: `{"handle":`, status: 400, errName: "SyntaxError"},
		{name: "not an object", ct: "application/json", body: `"str"`, status: 400, errName: "SyntaxError"},
		{name: "wrong type", ct: "application/json", body: `{"handle": 5}`, status: 400, errName: "InvalidRequest", msg: "Expected string value type (got 5) at $.handle"},
		{name: "nested wrong type", ct: "application/json", body: `{"nested": {"flag": "x"}}`, status: 400, errName: "InvalidRequest", msg: "Expected boolean value type (got \"x\") at $.nested.flag"},
		{name: "too large", ct: "application/json", body: `{"handle":"` + strings.Repeat("a", 100) + `"}`, limit: 50, status: 413, errName: "PayloadTooLargeError", msg: "request entity too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/xrpc/x.y.z", strings.NewReader(tc.body))
			if tc.noBody {
				r = httptest.NewRequest("POST", "/xrpc/x.y.z", nil)
				r.ContentLength = 0
			} else {
				r.Header.Set("Content-Length", "1") // as a server request carries it
			}
			if tc.ct != "" {
				r.Header.Set("Content-Type", tc.ct)
			}
			limit := tc.limit
			if limit == 0 {
				limit = xrpc.JSONLimit
			}
			var v in
			err := xrpc.DecodeJSON(r, limit, &v)
			if tc.status == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var xe *xrpc.Error
			if !errors.As(err, &xe) || xe.Status != tc.status || xe.Name != tc.errName || (tc.msg != "" && xe.Message != tc.msg) {
				t.Fatalf("err = %#v, want %d %s %q", err, tc.status, tc.errName, tc.msg)
			}
		})
	}
}
