package xrpc_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"errors"
	"net/http"
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

// The mux checks a procedure's input against its lexicon before the
// handler runs, in schema order, with the reference's messages: each case
// was asked of the reference (npm @atproto/pds 0.5.35) with the same body.
func TestHandleInputChecksLexicon(t *testing.T) {
	m := xrpc.NewMux(nil)
	type anyInput map[string]any
	var got anyInput
	for _, nsid := range []string{
		"com.atproto.identity.updateHandle", "com.atproto.admin.updateAccountHandle",
		"com.atproto.repo.applyWrites", "com.atproto.repo.createRecord", "com.atproto.repo.putRecord",
		"com.atproto.identity.submitPlcOperation", "com.atproto.server.createAppPassword",
	} {
		xrpc.HandleInput(m, nsid, xrpc.JSONLimit, xrpc.NoAuth{}, func(w http.ResponseWriter, r *http.Request, _ struct{}, in *anyInput) error {
			got = *in
			return nil
		})
	}
	long := strings.Repeat("a", 300)
	for _, tc := range []struct{ nsid, body, msg string }{
		{"com.atproto.identity.updateHandle", `{"handle":{"a":1,"b":2,"c":3}}`, `Expected string value type (got {"a": ..., "b": ..., ...}) at $.handle`},
		{"com.atproto.admin.updateAccountHandle", `{"did":"did:plc:x","handle":{"a":1,"b":2,"c":3}}`, `Expected string value type (got {"a": ..., "b": ..., ...}) at $.handle`},
		{"com.atproto.admin.updateAccountHandle", `{"handle":{"a":1,"b":2,"c":3}}`, `Missing required key "did" at $`},
		{"com.atproto.identity.updateHandle", `{"handle":"` + long + `"}`, `Invalid handle (got "` + long[:255] + `…") at $.handle`},
		{"com.atproto.repo.applyWrites", `{"repo":"fd1.test","writes":[{"$type":"com.atproto.repo.applyWrites#create","collection":5,"value":{}}]}`, `Expected string value type (got 5) at $.writes[0].collection`},
		{"com.atproto.repo.applyWrites", `{"repo":"fd1.test","writes":[{"collection":"a.b.c"}]}`, `Expected an object which includes the "$type" property value type (got {"collection": ...}) at $.writes[0]`},
		{"com.atproto.repo.createRecord", `{"collection":5,"repo":"x"}`, `Invalid AT identifier (got "x") at $.repo`},
		{"com.atproto.repo.createRecord", `{"record":{},"collection":"app.bsky.feed.post"}`, `Missing required key "repo" at $`},
		{"com.atproto.repo.createRecord", `[1,2]`, `Expected object value type (got [1, 2]) at $`},
		{"com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","swapCommit":"bad","record":{"a":1.5}}`, `Expected one of null, boolean, integer, string, cid, bytes, array or object value type (got 1.5) at $.record.a`},
		{"com.atproto.repo.createRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","record":null}`, `Expected object value type (got null) at $.record`},
		{"com.atproto.repo.putRecord", `{"repo":"fd1.test","collection":"app.bsky.feed.post","rkey":"a","record":{},"swapRecord":5}`, `Expected string value type (got 5) at $.swapRecord`},
		{"com.atproto.identity.submitPlcOperation", `{"operation":5}`, `Expected object value type (got 5) at $.operation`},
		{"com.atproto.server.createAppPassword", `{"name":"x","privileged":"yes"}`, `Expected boolean value type (got "yes") at $.privileged`},
		// On purpose unlike the reference, which ignores such a key: Go's
		// decoding would read it as "name".
		{"com.atproto.server.createAppPassword", `{"name":"x","NAME":"y"}`, `Key "NAME" differs only in case from "name" at $`},
		{"com.atproto.server.createAppPassword", `{"name":"x","other":5}`, ``},
	} {
		got = nil
		r := httptest.NewRequest("POST", "/xrpc/"+tc.nsid, strings.NewReader(tc.body))
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, r)
		if tc.msg == "" {
			if rec.Code != 200 || got == nil {
				t.Errorf("%s %s: %d %s, want the handler to run", tc.nsid, tc.body, rec.Code, rec.Body)
			}
			continue
		}
		var e struct{ Error, Message string }
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != 400 || e.Error != "InvalidRequest" || e.Message != tc.msg {
			t.Errorf("%s %.60s:\n got %d %s %q\nwant 400 InvalidRequest %q", tc.nsid, tc.body, rec.Code, e.Error, e.Message, tc.msg)
		}
		if got != nil {
			t.Errorf("%s: the handler ran on refused input", tc.nsid)
		}
	}
}

// A JSON body's Content-Encoding and charset, as the reference's body
// parser takes them (each answer asked of npm @atproto/pds 0.5.35 with
// curl): gzip and deflate inflated, other codings and non-UTF charsets
// 415, bytes that do not inflate 400 with zlib's message; the limit is on
// the inflated bytes.
func TestDecodeJSONEncodings(t *testing.T) {
	const doc = `{"handle":"a.test"}`
	var gz, zl bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write([]byte(doc))
	gw.Close()
	zw := zlib.NewWriter(&zl)
	zw.Write([]byte(doc))
	zw.Close()
	var big bytes.Buffer
	bw := gzip.NewWriter(&big)
	bw.Write([]byte(`{"handle":"` + strings.Repeat("a", 1000) + `"}`))
	bw.Close()
	for _, tc := range []struct {
		name, ct, coding, body string
		status                 int
		errName, msg           string
	}{
		{name: "gzip", coding: "gzip", body: gz.String()},
		{name: "GZIP", coding: "GZIP", body: gz.String()},
		{name: "deflate", coding: "deflate", body: zl.String()},
		{name: "identity", coding: "identity", body: doc},
		{name: "UTF-8", ct: "application/json; charset=UTF-8", body: doc},
		{name: "gzip garbage", coding: "gzip", body: doc, status: 400, errName: "Error", msg: "incorrect header check"},
		{name: "deflate garbage", coding: "deflate", body: doc, status: 400, errName: "Error", msg: "incorrect header check"},
		{name: "gzip cut short", coding: "gzip", body: gz.String()[:gz.Len()-10], status: 400, errName: "Error", msg: "unexpected end of file"},
		{name: "br", coding: "br", body: doc, status: 415, errName: "UnsupportedMediaTypeError", msg: `unsupported content encoding "br"`},
		{name: "x-gzip", coding: "x-gzip", body: gz.String(), status: 415, errName: "UnsupportedMediaTypeError", msg: `unsupported content encoding "x-gzip"`},
		{name: "a list", coding: "gzip, gzip", body: gz.String(), status: 415, errName: "UnsupportedMediaTypeError", msg: `unsupported content encoding "gzip, gzip"`},
		{name: "latin1", ct: "application/json; charset=latin1", body: doc, status: 415, errName: "UnsupportedMediaTypeError", msg: `unsupported charset "LATIN1"`},
		{name: "inflated past the limit", coding: "gzip", body: big.String(), status: 413, errName: "PayloadTooLargeError", msg: "request entity too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/xrpc/x.y.z", strings.NewReader(tc.body))
			ct := tc.ct
			if ct == "" {
				ct = "application/json"
			}
			r.Header.Set("Content-Type", ct)
			if tc.coding != "" {
				r.Header.Set("Content-Encoding", tc.coding)
			}
			var v struct{ Handle string }
			err := xrpc.DecodeJSON(r, 500, &v)
			if tc.status == 0 {
				if err != nil || v.Handle != "a.test" {
					t.Fatalf("got %+v, %v", v, err)
				}
				return
			}
			var xe *xrpc.Error
			if !errors.As(err, &xe) || xe.Status != tc.status || xe.Name != tc.errName || xe.Message != tc.msg {
				t.Fatalf("err = %#v, want %d %s %q", err, tc.status, tc.errName, tc.msg)
			}
		})
	}
}
