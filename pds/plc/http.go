package plc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/jsvalue"
)

// Version is what GET /_health reports.
const Version = "fakepds"

// Limits and defaults of the reference's HTTP layer.
const (
	maxBodyBytes       = 100 << 10 // express.json({limit: '100kb'})
	defaultExportCount = 1000
	maxExportCount     = 1000
)

// Handler serves the public directory's HTTP API (see the package doc).
// Errors are {"message": ...} with the public directory's status codes.
func (d *Directory) Handler() http.Handler { return d.handler }

func (d *Directory) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://web.plc.directory", http.StatusFound)
	})
	mux.HandleFunc("GET /_health", d.serveHealth)
	mux.HandleFunc("GET /export", d.serveExport)
	mux.HandleFunc("GET /{did}", d.serveDocument)
	mux.HandleFunc("GET /{did}/data", d.serveData)
	mux.HandleFunc("GET /{did}/log", d.serveLog)
	mux.HandleFunc("GET /{did}/log/audit", d.serveAuditLog)
	mux.HandleFunc("GET /{did}/log/last", d.serveLast)
	mux.HandleFunc("POST /{did}", d.serveSubmit)
	// Anything else gets Express's 404 page, not net/http's 404 or 405.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		writeRaw(w, http.StatusNotFound, "text/html; charset=utf-8", []byte(
			"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n</head>\n<body>\n<pre>Cannot "+
				r.Method+" "+html.EscapeString(r.URL.RequestURI())+"</pre>\n</body>\n</html>\n"))
	})
	return cors(mux)
}

// cors is the reference's cors() middleware with its defaults: any origin,
// and a 204 to every preflight.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET,HEAD,PUT,PATCH,POST,DELETE")
			if h := r.Header.Get("Access-Control-Request-Headers"); h != "" {
				w.Header().Set("Access-Control-Allow-Headers", h)
				w.Header().Add("Vary", "Access-Control-Request-Headers")
			}
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

const jsonType = "application/json; charset=utf-8"

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := jsvalue.Marshal(v)
	if err != nil {
		writeMessage(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	writeRaw(w, status, contentType, b)
}

func writeRaw(w http.ResponseWriter, status int, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// writeMessage writes the reference's error body.
func writeMessage(w http.ResponseWriter, status int, msg string) {
	b, _ := jsvalue.Marshal(struct {
		Message string `json:"message"`
	}{msg})
	writeRaw(w, status, jsonType, b)
}

// writeError answers err as the reference's error handler would.
func writeError(w http.ResponseWriter, r *http.Request, did string, err error) {
	var opErr *OpError
	switch {
	case errors.Is(err, ErrNotFound):
		writeMessage(w, http.StatusNotFound, "DID not registered: "+did)
	case errors.Is(err, ErrTombstoned):
		// The reference's source says 404 here; plc.directory answers 410,
		// and so does go-didplc's replica. Follow production.
		writeMessage(w, http.StatusGone, "DID not available: "+did)
	case errors.As(err, &opErr):
		writeMessage(w, opErr.Status, opErr.Message)
	default:
		slog.ErrorContext(r.Context(), "plc directory", "method", r.Method, "path", r.URL.Path, "err", err)
		writeMessage(w, http.StatusInternalServerError, "Internal Server Error")
	}
}

func (d *Directory) serveHealth(w http.ResponseWriter, r *http.Request) {
	var one int
	if err := d.db.Reader().QueryRowContext(r.Context(), "SELECT 1").Scan(&one); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, jsonType, map[string]string{"version": Version, "error": "Service Unavailable"})
		return
	}
	writeJSON(w, http.StatusOK, jsonType, map[string]string{"version": Version})
}

func (d *Directory) serveDocument(w http.ResponseWriter, r *http.Request) {
	did := r.PathValue("did")
	doc, err := d.Resolve(r.Context(), syntax.DID(did))
	if err != nil {
		writeError(w, r, did, err)
		return
	}
	writeJSON(w, http.StatusOK, "application/did+ld+json; charset=utf-8", doc)
}

func (d *Directory) serveData(w http.ResponseWriter, r *http.Request) {
	did := r.PathValue("did")
	data, err := d.Data(r.Context(), syntax.DID(did))
	if err != nil {
		writeError(w, r, did, err)
		return
	}
	writeJSON(w, http.StatusOK, jsonType, data)
}

func (d *Directory) serveLast(w http.ResponseWriter, r *http.Request) {
	did := r.PathValue("did")
	b, err := d.lastJSON(r.Context(), did)
	if err != nil {
		writeError(w, r, did, err)
		return
	}
	writeRaw(w, http.StatusOK, jsonType, b)
}

// serveLog splices the stored JSON: no operation is decoded.
func (d *Directory) serveLog(w http.ResponseWriter, r *http.Request) {
	did := r.PathValue("did")
	es, err := d.entries(r.Context(), did)
	if err != nil {
		writeError(w, r, did, err)
		return
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for _, e := range es {
		if e.nullified {
			continue
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		buf.Write(e.op)
	}
	buf.WriteByte(']')
	writeRaw(w, http.StatusOK, jsonType, buf.Bytes())
}

// auditEntry is an entry of /log/audit, in the reference's key order.
type auditEntry struct {
	DID       string          `json:"did"`
	Operation json.RawMessage `json:"operation"`
	CID       string          `json:"cid"`
	Nullified bool            `json:"nullified"`
	CreatedAt string          `json:"createdAt"`
}

func (d *Directory) serveAuditLog(w http.ResponseWriter, r *http.Request) {
	did := r.PathValue("did")
	es, err := d.entries(r.Context(), did)
	if err != nil {
		writeError(w, r, did, err)
		return
	}
	out := make([]auditEntry, len(es))
	for i, e := range es {
		out[i] = auditEntry{DID: did, Operation: e.op, CID: e.cid, Nullified: e.nullified, CreatedAt: formatMillis(e.createdAt)}
	}
	writeJSON(w, http.StatusOK, jsonType, out)
}

func (d *Directory) serveSubmit(w http.ResponseWriter, r *http.Request) {
	did := r.PathValue("did")
	body, status, msg := readBody(w, r)
	if status != 0 {
		writeMessage(w, status, msg)
		return
	}
	in, err := parseIncoming(body)
	if err == nil {
		err = d.add(r.Context(), did, in)
	}
	if err != nil {
		writeError(w, r, did, err)
		return
	}
	writeRaw(w, http.StatusOK, "text/plain; charset=utf-8", []byte("OK"))
}

// readBody reads a request body as express.json() does: a body that is not
// application/json, or none at all, is an empty object; a JSON body must be
// an object or an array (its strict mode). A refusal is a status and the
// message body-parser gives it.
func readBody(w http.ResponseWriter, r *http.Request) (body []byte, status int, msg string) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		return []byte("{}"), 0, ""
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, http.StatusRequestEntityTooLarge, "request entity too large"
	case err != nil:
		return nil, http.StatusBadRequest, "request aborted"
	}
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 {
		return []byte("{}"), 0, ""
	}
	if t[0] != '{' && t[0] != '[' {
		return nil, http.StatusBadRequest, fmt.Sprintf("Unexpected token %c in JSON at position %d", t[0], len(b)-len(t))
	}
	return b, 0, ""
}

// exportedOp is a line of /export by timestamp, in the reference's key order.
type exportedOp struct {
	DID       string          `json:"did"`
	CID       string          `json:"cid"`
	CreatedAt string          `json:"createdAt"`
	Operation json.RawMessage `json:"operation"`
	Nullified bool            `json:"nullified"`
}

// sequencedOp is a line of /export by seq.
type sequencedOp struct {
	DID       string          `json:"did"`
	CID       string          `json:"cid"`
	Seq       int64           `json:"seq"`
	CreatedAt string          `json:"createdAt"`
	Operation json.RawMessage `json:"operation"`
	Type      string          `json:"type"`
}

// serveExport pages through every operation: by createdAt (then cid) after
// a timestamp, or by seq after a number, count (at most 1000) at a time.
func (d *Directory) serveExport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// The reference reads a parameter only when it is given once (qs makes
	// repeated ones an array, which it ignores).
	param := func(name string) string {
		if v := q[name]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	count := defaultExportCount
	if c := param("count"); c != "" {
		n, ok := jsvalue.ParseInt(c)
		if !ok || n < 1 {
			writeMessage(w, http.StatusBadRequest, "Invalid count parameter")
			return
		}
		count = int(min(n, maxExportCount))
	}

	var (
		query string
		args  []any
		seqd  bool
	)
	after := param("after")
	switch {
	case after != "" && strings.Trim(after, "0123456789") == "":
		seqd = true
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil { // beyond int64: after every seq there is
			n = math.MaxInt64
		}
		query = `SELECT seq, did, cid, operation, nullified, created_at FROM operations WHERE seq > ? ORDER BY seq LIMIT ?`
		args = []any{n, count}
	case after != "":
		t, ok := parseJSDate(after)
		if !ok {
			writeMessage(w, http.StatusBadRequest, "Invalid after parameter")
			return
		}
		query = `SELECT seq, did, cid, operation, nullified, created_at FROM operations WHERE created_at > ? ORDER BY created_at, cid LIMIT ?`
		args = []any{t.UnixMilli(), count}
	default:
		query = `SELECT seq, did, cid, operation, nullified, created_at FROM operations ORDER BY created_at, cid LIMIT ?`
		args = []any{count}
	}

	rows, err := d.db.Reader().QueryContext(r.Context(), query, args...)
	if err != nil {
		writeError(w, r, "", err)
		return
	}
	defer rows.Close()
	var buf bytes.Buffer
	for rows.Next() {
		var (
			e   entry
			did string
		)
		if err := rows.Scan(&e.seq, &did, &e.cid, &e.op, &e.nullified, &e.createdAt); err != nil {
			writeError(w, r, "", err)
			return
		}
		var line any = exportedOp{DID: did, CID: e.cid, CreatedAt: formatMillis(e.createdAt), Operation: e.op, Nullified: e.nullified}
		if seqd {
			line = sequencedOp{DID: did, CID: e.cid, Seq: e.seq, CreatedAt: formatMillis(e.createdAt), Operation: e.op, Type: "sequenced_op"}
		}
		b, err := jsvalue.Marshal(line)
		if err != nil {
			writeError(w, r, "", err)
			return
		}
		// Lines are joined, not terminated: no newline after the last.
		if buf.Len() > 0 {
			buf.WriteByte('\n')
		}
		buf.Write(b)
	}
	if err := rows.Err(); err != nil {
		writeError(w, r, "", err)
		return
	}
	writeRaw(w, http.StatusOK, "application/jsonlines", buf.Bytes())
}

// parseJSDate reads the ISO 8601 forms JavaScript's Date parses, truncated
// to its millisecond precision. Zone-less forms are UTC here (JavaScript
// takes the server's zone, which is UTC in production).
func parseJSDate(s string) (time.Time, bool) {
	for _, layout := range []string{
		time.RFC3339Nano,
		"2006-01-02T15:04:05.999999999",
		"2006-01-02T15:04Z07:00",
		"2006-01-02T15:04",
		"2006-01-02",
		"2006-01",
		"2006",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.Truncate(time.Millisecond), true
		}
	}
	return time.Time{}, false
}
