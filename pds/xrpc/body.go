package xrpc

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/andybalholm/brotli"
)

// Body limits, as the reference PDS sets them: JSON input 150 kB, record
// writes 1 MB.
const (
	JSONLimit   = 150 * 1024
	RecordLimit = 1_000_000
)

// hasBody reports whether the request declares a body at all. The reference
// tells "no body" (no Content-Length, no Transfer-Encoding) from an empty one.
func hasBody(r *http.Request) bool {
	return r.ContentLength > 0 || len(r.TransferEncoding) > 0 ||
		r.ContentLength == 0 && r.Header.Get("Content-Length") != ""
}

// Encoding is the request's media type without parameters, or an error
// when it has none.
func Encoding(r *http.Request) (string, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return "", InvalidRequest("", "Request encoding (Content-Type) required but not provided")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", InvalidRequest("", "Request encoding (Content-Type) required but not provided")
	}
	return mt, nil
}

// DecodeJSON reads a procedure's JSON input into v, with the checks and
// errors of the reference: a body must be present and declared JSON, at
// most limit bytes (413 PayloadTooLargeError, the name the reference's body
// parser leaks), and parse (400 SyntaxError, likewise).
func DecodeJSON(r *http.Request, limit int64, v any) error {
	if !hasBody(r) {
		return InvalidRequest("", "A request body is expected but none was provided")
	}
	enc, err := Encoding(r)
	if err != nil {
		return err
	}
	if enc != "application/json" {
		return InvalidRequest("", "Wrong request encoding (Content-Type): %s", enc)
	}
	if r.ContentLength > limit {
		return jsonTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return ReadError(err)
	}
	if int64(len(b)) > limit {
		return jsonTooLarge
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		// An empty body parses as {} in the reference, and then fails the
		// handler's own checks for required fields.
		b = []byte("{}")
	}
	if b[0] != '{' && b[0] != '[' {
		// Strict JSON parsing: the reference accepts only objects and arrays.
		return &Error{Status: 400, Name: "SyntaxError", Message: "Unexpected token in JSON body: objects and arrays only"}
	}
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return &Error{Status: 400, Name: "SyntaxError", Message: fmt.Sprintf("Invalid JSON at offset %d: %v", se.Offset, se)}
		case errors.As(err, &te):
			return InvalidRequest("", "Expected %s value type (got %s) at $.%s", kindName(te.Type), valueAt(b, te.Field), te.Field)
		}
		return InvalidRequest("", "Invalid input: %v", err)
	}
	return nil
}

var jsonTooLarge = &Error{Status: http.StatusRequestEntityTooLarge, Name: "PayloadTooLargeError", Message: "request entity too large"}

// valueAt is the JSON of the value at a dotted field path of body, as the
// reference quotes it in a type error.
func valueAt(body []byte, field string) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return "?"
	}
	for _, k := range strings.Split(field, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return "?"
		}
		v = m[k]
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// kindName names the JSON type a Go field wants, in the reference's words
// ("Expected string value type (got 1) at $.handle").
func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

// MissingInput is the reference's schema error for a required input
// property that is absent.
func MissingInput(key string) *Error {
	return InvalidRequest("", `Missing required key %q at $`, key)
}

// MissingParam is the reference's error for a required query parameter
// that is absent from a call to nsid.
func MissingParam(nsid, key string) *Error {
	return InvalidRequest("", `Invalid %s params: Missing required key %q`, nsid, key)
}

// NoBody checks that a procedure without input got no body, as the
// reference does.
func NoBody(r *http.Request) error {
	if r.ContentLength > 0 {
		return InvalidRequest("", "A request body was provided when none was expected")
	}
	return nil
}

// IntParam reads an integer query parameter of nsid within [min, max]
// (def when absent), with the reference's messages for the rest.
func IntParam(r *http.Request, nsid, name string, def, min, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return 0, InvalidRequest("", "Invalid %s params: Expected integer value type (got %q)", nsid, v)
	case n < min:
		return 0, InvalidRequest("", "Invalid %s params: integer too small (minimum %d, got %d)", nsid, min, n)
	case n > max:
		return 0, InvalidRequest("", "Invalid %s params: integer too big (maximum %d, got %d)", nsid, max, n)
	}
	return n, nil
}

// ReadError answers a request whose body could not be read: 408 when the
// server's read deadline passed (a client that stalled mid-body, as Node's
// requestTimeout answers), else 400.
func ReadError(err error) *Error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return Errorf(http.StatusRequestTimeout, "RequestTimeout", "request body not received in time")
	}
	return InvalidRequest("", "could not read request body")
}

// DecodedBody is the request's body with its Content-Encoding undone, as
// the reference's XRPC server decodes the input of a procedure that takes
// raw bytes (uploadBlob, importRepo): gzip, x-gzip, deflate, br and
// identity, in the order they were applied. Any other coding answers 415.
// A body that does not decode fails while it is read, and the caller
// answers that with a 500, as the reference does.
func DecodedBody(r *http.Request) (io.Reader, error) {
	var codings []string
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	var body io.Reader = r.Body
	for i := len(codings) - 1; i >= 0; i-- {
		var err error
		switch codings[i] {
		case "gzip", "x-gzip":
			body, err = gzip.NewReader(body)
		case "deflate":
			body, err = zlib.NewReader(body)
		case "br":
			body = brotli.NewReader(body)
		default:
			return nil, Errorf(http.StatusUnsupportedMediaType, "UnsupportedMediaType", "unsupported content-encoding")
		}
		if err != nil {
			return nil, fmt.Errorf("content-encoding %s: %w", codings[i], err)
		}
	}
	return body, nil
}
