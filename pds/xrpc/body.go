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
	mt, _, err := mediaType(r)
	return mt, err
}

// mediaType is the request's media type and its parameters, as
// mime.ParseMediaType reads them (nil parameters for the common bare
// "application/json", which it parses to no parameters).
func mediaType(r *http.Request) (string, map[string]string, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" {
		return ct, nil, nil
	}
	if ct == "" {
		return "", nil, InvalidRequest("", "Request encoding (Content-Type) required but not provided")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", nil, InvalidRequest("", "Request encoding (Content-Type) required but not provided")
	}
	return mt, params, nil
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
	enc, params, err := mediaType(r)
	if err != nil {
		return nil, err
	}
	if enc != "application/json" {
		return nil, InvalidRequest("", "Wrong request encoding (Content-Type): %s", enc)
	}
	body, identity, err := jsonBody(r, params["charset"])
	if err != nil {
		return nil, err
	}
	if identity && r.ContentLength > limit {
		return nil, jsonTooLarge
	}
	hint := int64(-1)
	if identity {
		hint = r.ContentLength
	}
	b, err := readAll(body, hint, limit+1)
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

// readAll is io.ReadAll(io.LimitReader(r, n)) in a buffer sized by hint,
// the body's length when known (-1 when not): one allocation for a body
// of known length, where io.ReadAll grows from 512 bytes.
func readAll(r io.Reader, hint, n int64) ([]byte, error) {
	size := int64(512)
	if hint >= 0 {
		// One byte more, for the read that sees the end.
		size = min(hint+1, n)
	}
	lr := io.LimitedReader{R: r, N: n}
	b := make([]byte, 0, size)
	for {
		m, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// jsonBody is a JSON body as the reference's body parser reads it: in
// UTF-8 (a charset, given in charset, not "utf-..." is 415), with gzip or deflate undone (any
// other Content-Encoding, or a list of them, is 415; bytes that do not
// inflate are 400 with zlib's message, the name the parser leaks). The
// limit applies to the inflated bytes; identity is true when there are no
// others. Read errors come back as the answers to give.
func jsonBody(r *http.Request, charset string) (io.Reader, bool, error) {
	if cs := strings.ToLower(charset); cs != "" && !strings.HasPrefix(cs, "utf-") {
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

// InputReader is an input type of HandleInput that reads itself from its
// input as the lexicon check parsed it, which saves encoding/json's second
// parse of the body. ReadInput must fill it as json.Unmarshal would from
// any input the method's lexicon passes, and fail on anything else.
type InputReader interface {
	ReadInput(in *lexval.Input) error
}

// decodeInput reads and checks a procedure's JSON input against the
// method's lexicon, then decodes it into v (ReadInput, when v is an
// InputReader).
func decodeInput(r *http.Request, nsid string, limit int64, v any) error {
	b, err := readJSON(r, limit)
	if err != nil {
		return err
	}
	checked, err := lexval.CheckInput(nsid, b)
	if err != nil {
		var le *lexval.Error
		switch {
		case errors.Is(err, lexval.ErrSyntax):
			var raw any
			if jerr := json.Unmarshal(b, &raw); jerr != nil {
				return jsonError(b, jerr)
			}
			return &Error{Status: 400, Name: "SyntaxError", Message: "Invalid JSON body"}
		case errors.As(err, &le):
			return InvalidRequest("", "%s", le.Message)
		}
		return err
	}
	var readErr error
	if ir, ok := v.(InputReader); ok {
		if readErr = ir.ReadInput(checked); readErr == nil {
			return nil
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		// The lexicon let it through, but not Go's types (1.0 for an
		// integer, say): not a value any handler expects.
		return jsonError(b, err)
	}
	if readErr != nil {
		return fmt.Errorf("xrpc: %s: the input reader refused what json.Unmarshal took: %w", nsid, readErr)
	}
	return nil
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
