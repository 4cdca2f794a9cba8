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
	"strings"

	"github.com/andybalholm/brotli"

	"github.com/fakepds/fakepds/pds/jsvalue"
	"github.com/fakepds/fakepds/pds/lexval"
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

// DecodeJSON reads a JSON request body into v, with the checks and errors
// the reference's procedures answer: see readJSON. XRPC methods get their
// input from the mux ([HandleInput]); this is for the other routes.
func DecodeJSON(r *http.Request, limit int64, v any) error {
	b, err := readJSON(r, limit)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return jsonError(b, err)
	}
	return nil
}

// readJSON reads a procedure's JSON input with the checks and errors of the
// reference: a body must be present and declared JSON, at most limit bytes
// (413 PayloadTooLargeError, the name the reference's body parser leaks),
// and an object or an array (400 SyntaxError, likewise). An empty body
// reads as {}, as the reference's parser has it.
func readJSON(r *http.Request, limit int64) ([]byte, error) {
	if !hasBody(r) {
		return nil, InvalidRequest("", "A request body is expected but none was provided")
	}
	enc, err := Encoding(r)
	if err != nil {
		return nil, err
	}
	if enc != "application/json" {
		return nil, InvalidRequest("", "Wrong request encoding (Content-Type): %s", enc)
	}
	body, identity, err := jsonBody(r)
	if err != nil {
		return nil, err
	}
	if identity && r.ContentLength > limit {
		return nil, jsonTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, jsonTooLarge
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return []byte("{}"), nil
	}
	if b[0] != '{' && b[0] != '[' {
		// Strict JSON parsing: the reference accepts only objects and arrays.
		return nil, &Error{Status: 400, Name: "SyntaxError", Message: "Unexpected token in JSON body: objects and arrays only"}
	}
	return b, nil
}

// jsonBody is a JSON body as the reference's body parser reads it: in
// UTF-8 (a charset not "utf-..." is 415), with gzip or deflate undone (any
// other Content-Encoding, or a list of them, is 415; bytes that do not
// inflate are 400 with zlib's message, the name the parser leaks). The
// limit applies to the inflated bytes; identity is true when there are no
// others. Read errors come back as the answers to give.
func jsonBody(r *http.Request) (io.Reader, bool, error) {
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if cs := strings.ToLower(params["charset"]); cs != "" && !strings.HasPrefix(cs, "utf-") {
		return nil, false, Errorf(http.StatusUnsupportedMediaType, "UnsupportedMediaTypeError", "unsupported charset %q", strings.ToUpper(cs))
	}
	body := &bodyErrors{r: r.Body}
	var inflate func(io.Reader) (io.Reader, error)
	switch coding := strings.ToLower(r.Header.Get("Content-Encoding")); coding {
	case "", "identity":
		return body, true, nil
	case "gzip":
		inflate = func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
	case "deflate":
		inflate = func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }
	default:
		return nil, false, Errorf(http.StatusUnsupportedMediaType, "UnsupportedMediaTypeError", "unsupported content encoding %q", coding)
	}
	zr, err := inflate(body)
	if err != nil {
		return nil, false, body.answer(err)
	}
	return &bodyErrors{r: zr, inner: body}, false, nil
}

// bodyErrors turns read errors into answers: the client's body failing is
// ReadError's; an encoding failing is 400 Error with zlib's message.
type bodyErrors struct {
	r     io.Reader
	inner *bodyErrors // the client's body, under a decoder
	err   error       // the client's body's own error
}

func (b *bodyErrors) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		if b.inner == nil {
			b.err = err
		}
		err = b.answer(err)
	}
	return n, err
}

func (b *bodyErrors) answer(err error) error {
	var xe *Error
	switch {
	case errors.As(err, &xe):
		return xe
	case b.inner != nil && b.inner.err != nil:
		return ReadError(b.inner.err)
	case b.inner == nil && b.err != nil:
		return ReadError(b.err)
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, zlib.ErrHeader):
		return &Error{Status: 400, Name: "Error", Message: "incorrect header check"}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Error{Status: 400, Name: "Error", Message: "unexpected end of file"}
	}
	return &Error{Status: 400, Name: "Error", Message: "incorrect data check"}
}

// jsonError is the reference's answer to a body encoding/json refused.
func jsonError(b []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return &Error{Status: 400, Name: "SyntaxError", Message: fmt.Sprintf("Invalid JSON at offset %d: %v", se.Offset, se)}
	case errors.As(err, &te):
		return InvalidRequest("", "Invalid input: %s", jsvalue.PreviewJSON(b))
	}
	return InvalidRequest("", "Invalid input: %v", err)
}

// decodeInput reads and checks a procedure's JSON input against the
// method's lexicon, then decodes it into v. It returns the input as the
// check parsed it.
func decodeInput(r *http.Request, nsid string, limit int64, v any) (*lexval.Input, error) {
	b, err := readJSON(r, limit)
	if err != nil {
		return nil, err
	}
	checked, err := lexval.CheckInput(nsid, b)
	if err != nil {
		var le *lexval.Error
		switch {
		case errors.Is(err, lexval.ErrSyntax):
			var raw any
			if jerr := json.Unmarshal(b, &raw); jerr != nil {
				return nil, jsonError(b, jerr)
			}
			return nil, &Error{Status: 400, Name: "SyntaxError", Message: "Invalid JSON body"}
		case errors.As(err, &le):
			return nil, InvalidRequest("", "%s", le.Message)
		}
		return nil, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		// The lexicon let it through, but not Go's types (1.0 for an
		// integer, say): not a value any handler expects.
		return nil, jsonError(b, err)
	}
	return checked, nil
}

type checkedKey struct{}

// CheckedInput is the input of a call to a method registered with
// HandleInput as its lexicon check parsed it: the records it holds go to
// lexval.PrepareValue without a second parse. Nil outside such a call.
func CheckedInput(r *http.Request) *lexval.Input {
	in, _ := r.Context().Value(checkedKey{}).(*lexval.Input)
	return in
}

var jsonTooLarge = &Error{Status: http.StatusRequestEntityTooLarge, Name: "PayloadTooLargeError", Message: "request entity too large"}

// MissingInput is the reference's schema error for a required input
// property that is absent.
func MissingInput(key string) *Error {
	return InvalidRequest("", `Missing required key %q at $`, key)
}

// NoBody checks that a procedure without input got no body, as the
// reference does.
func NoBody(r *http.Request) error {
	if r.ContentLength > 0 {
		return InvalidRequest("", "A request body was provided when none was expected")
	}
	return nil
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
