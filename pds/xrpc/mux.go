package xrpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/faults"
	"github.com/fakepds/fakepds/pds/lexval"
	"github.com/fakepds/fakepds/pds/stats"
)

// Kind is the lexicon type of a method: a query is a GET, a procedure a POST.
type Kind uint8

const (
	Query Kind = iota + 1
	Procedure
	Subscription // a GET upgraded to a WebSocket
)

func (k Kind) httpMethod() string {
	if k == Procedure {
		return http.MethodPost
	}
	return http.MethodGet
}

// Auth is who may call a method, declared where the method is registered.
// The mux runs Authenticate after the method's params are checked and
// before its input is read, the reference's order, and hands what it
// returns (the caller) to the handler. An error is answered as it is.
type Auth[C any] interface {
	Authenticate(r *http.Request) (C, error)
}

// Handler serves one XRPC method for an authenticated caller. Returning an
// error writes the error envelope; a handler that wrote its response
// returns nil.
type Handler[C any] func(w http.ResponseWriter, r *http.Request, caller C) error

// NoAuth lets anyone call a method.
type NoAuth struct{}

// Authenticate accepts every request.
func (NoAuth) Authenticate(*http.Request) (struct{}, error) { return struct{}{}, nil }

// Method is a registered method, as [Mux.Methods] lists it.
type Method struct {
	NSID string
	Kind Kind
	Auth any // the Auth it was registered with
}

type method struct {
	Method
	serve func(w http.ResponseWriter, r *http.Request) error // auth, then the handler
}

// Mux routes /xrpc/{nsid} to the registered methods.
type Mux struct {
	methods map[string]method
	log     *slog.Logger
	// Faults, when set, can fail or delay calls before their handler runs.
	Faults *faults.Faults
	// Stats, when set, records every call's method, status and duration.
	Stats *stats.Stats
	// Fallback, when set, may serve a method that is not registered (the
	// PDS proxies it to its appview); it reports whether it did.
	Fallback func(w http.ResponseWriter, r *http.Request, nsid string) bool
}

// NewMux returns an empty Mux. Panics in handlers are logged to log and
// answered with a 500.
func NewMux(log *slog.Logger) *Mux {
	if log == nil {
		log = slog.Default()
	}
	return &Mux{methods: make(map[string]method), log: log}
}

// Handle registers h as the method nsid of the given kind, called once a
// passes. Every method declares its auth ([NoAuth] for anyone). A procedure
// whose lexicon declares no input must come without a body; one whose
// input is JSON is registered with [HandleInput] instead; other inputs
// (blobs, CARs) are the handler's to read.
//
// A nil a, a name registered twice, an invalid NSID or a JSON procedure
// registered here is a programming error and panics.
func Handle[C any](m *Mux, kind Kind, nsid string, a Auth[C], h Handler[C]) {
	enc := m.register(kind, nsid, a)
	if enc == "application/json" {
		panic("xrpc: " + nsid + " takes JSON input: register it with HandleInput")
	}
	noInput := kind == Procedure && enc == ""
	m.methods[nsid] = method{
		Method: Method{NSID: nsid, Kind: kind, Auth: a},
		serve: func(w http.ResponseWriter, r *http.Request) error {
			c, err := a.Authenticate(r)
			if err != nil {
				return err
			}
			if noInput {
				if err := NoBody(r); err != nil {
					return err
				}
			}
			return h(w, r, c)
		},
	}
}

// InputHandler serves a procedure whose JSON input the mux has read,
// checked against the method's lexicon and decoded into in.
type InputHandler[C, In any] func(w http.ResponseWriter, r *http.Request, caller C, in *In) error

// HandleInput registers a procedure whose lexicon declares JSON input, of at
// most limit bytes. The mux checks the params, then a, then reads the body
// and checks it against the lexicon's input schema with the reference's
// messages, then decodes it into an In for h (by its ReadInput when *In is
// an [InputReader]): a handler never sees input its lexicon refuses. It panics as Handle does, and when the lexicon
// declares no JSON input.
func HandleInput[C, In any](m *Mux, nsid string, limit int64, a Auth[C], h InputHandler[C, In]) {
	if enc := m.register(Procedure, nsid, a); enc != "application/json" {
		panic("xrpc: " + nsid + " takes no JSON input (" + enc + "): register it with Handle")
	}
	m.methods[nsid] = method{
		Method: Method{NSID: nsid, Kind: Procedure, Auth: a},
		serve: func(w http.ResponseWriter, r *http.Request) error {
			c, err := a.Authenticate(r)
			if err != nil {
				return err
			}
			in := new(In)
			if err := decodeInput(r, nsid, limit, in); err != nil {
				return err
			}
			return h(w, r, c, in)
		},
	}
}

// register checks a registration and returns the method's input encoding
// from its lexicon ("" for none).
func (m *Mux) register(kind Kind, nsid string, a any) string {
	if _, err := syntax.ParseNSID(nsid); err != nil {
		panic("xrpc: register " + nsid + ": " + err.Error())
	}
	if _, dup := m.methods[nsid]; dup {
		panic("xrpc: method registered twice: " + nsid)
	}
	if a == nil {
		panic("xrpc: method registered without auth: " + nsid)
	}
	enc, err := lexval.InputEncoding(nsid)
	if err != nil {
		panic("xrpc: register " + nsid + ": " + err.Error())
	}
	return enc
}

// Methods lists the registered methods, by NSID.
func (m *Mux) Methods() []Method {
	out := make([]Method, 0, len(m.methods))
	for _, meth := range m.methods {
		out = append(out, meth.Method)
	}
	slices.SortFunc(out, func(a, b Method) int { return strings.Compare(a.NSID, b.NSID) })
	return out
}

// NSID is the method name of an /xrpc/ request path, or "" when the path
// names no valid NSID.
func NSID(path string) string {
	name, ok := strings.CutPrefix(path, "/xrpc/")
	if !ok {
		return ""
	}
	if !lexval.ValidNSID(name) {
		return ""
	}
	return name
}

// ServeHTTP serves /xrpc/{nsid}.
func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			m.log.Error("xrpc handler panic", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			WriteError(w, internal)
		}
	}()
	name := NSID(r.URL.Path)
	if name == "" {
		WriteError(w, InvalidRequest("", "invalid xrpc path"))
		return
	}
	if m.Stats != nil {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		w = rec
		defer func() { m.Stats.Record(name, rec.status, time.Since(start)) }()
	}
	if m.Faults != nil {
		if rule, ok := m.Faults.Take(name); ok {
			if rule.Delay > 0 {
				select {
				case <-time.After(rule.Delay):
				case <-r.Context().Done():
					return
				}
			}
			if rule.Status != 0 {
				WriteError(w, withDefaultName(&Error{Status: rule.Status, Name: rule.Error, Message: rule.Message}))
				return
			}
		}
	}
	meth, ok := m.methods[name]
	if !ok {
		if m.Fallback == nil || !m.Fallback(w, r, name) {
			WriteError(w, NotImplemented())
		}
		return
	}
	want := meth.Kind.httpMethod()
	if r.Method != want && !(want == http.MethodGet && r.Method == http.MethodHead) {
		WriteError(w, InvalidRequest("", "Incorrect HTTP method (%s) expected %s", r.Method, want))
		return
	}
	if meth.Kind != Subscription {
		if err := checkParams(name, r.URL.RawQuery); err != nil {
			m.fail(w, name, err)
			return
		}
	}
	if err := meth.serve(w, r); err != nil {
		m.fail(w, name, err)
	}
}

// fail answers a call with err, logging what is ours (a 5xx).
func (m *Mux) fail(w http.ResponseWriter, nsid string, err error) {
	e := asError(err)
	if e.Status >= 500 {
		m.log.Error("xrpc method failed", "method", nsid, "err", err)
	}
	WriteError(w, e)
}

// checkParams checks a call's parameters against its lexicon, before its
// auth, as the reference does.
func checkParams(nsid, rawQuery string) error {
	err := lexval.CheckParams(nsid, rawQuery)
	if err == nil {
		return nil // before errors.As, whose target would escape
	}
	var le *lexval.Error
	if errors.As(err, &le) {
		return InvalidRequest("", "%s", le.Message)
	}
	return err
}

// statusRecorder remembers the status a handler wrote. It passes Hijack
// through, for the WebSocket upgrade of subscriptions.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("xrpc: connection cannot be hijacked")
	}
	r.status = http.StatusSwitchingProtocols
	return h.Hijack()
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// WriteError writes err as an XRPC error envelope. Errors that are not
// *Error become a bare 500.
func WriteError(w http.ResponseWriter, err error) {
	e := asError(err)
	// WriteJSON's bytes of struct{Error string `json:"error"`; Message
	// string `json:"message,omitempty"`}.
	b := make([]byte, 0, 24+len(e.Name)+len(e.Message))
	b = append(b, `{"error":`...)
	b = AppendString(b, e.Name)
	if e.Message != "" {
		b = append(b, `,"message":`...)
		b = AppendString(b, e.Message)
	}
	WriteRawJSON(w, e.Status, append(b, '}'))
}

// WriteJSON writes v as a JSON response with the given status. Like
// JavaScript's JSON.stringify (the reference's), it leaves <, > and & as
// they are: records must come back as they were written.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	buf := jsonBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledJSON {
			buf.Reset()
			jsonBufs.Put(buf)
		}
	}()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	var b []byte
	if err := enc.Encode(v); err != nil {
		status, b = 500, []byte(`{"error":"InternalServerError","message":"Internal Server Error"}`)
	} else {
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	// The writer copies b (an io.Writer keeps nothing of what it is
	// given), so the buffer can serve the next answer.
	WriteRawJSON(w, status, b)
}

// jsonBufs are WriteJSON's buffers; one grown past maxPooledJSON is left
// to the GC.
var jsonBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledJSON = 64 << 10

// jsonContentType is every JSON answer's Content-Type, one slice for all:
// Header.Set would make one per answer. Nothing changes a header value in
// place (Set and Add replace or grow the slice).
var jsonContentType = []string{"application/json; charset=utf-8"}

// WriteRawJSON answers body, JSON a handler wrote itself, as WriteJSON
// answers what it encodes.
func WriteRawJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
