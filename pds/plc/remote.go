package plc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
)

// Client is what a PDS needs of a PLC directory: *Directory in process, or
// *Remote over HTTP (another server's directory), with the same errors.
type Client interface {
	Resolve(ctx context.Context, did syntax.DID) (*Document, error)
	Data(ctx context.Context, did syntax.DID) (*Data, error)
	Last(ctx context.Context, did syntax.DID) (didplc.Operation, error)
	Submit(ctx context.Context, did syntax.DID, op didplc.Operation) error
}

var (
	_ Client = (*Directory)(nil)
	_ Client = (*Remote)(nil)
)

// Remote is a PLC directory reached over HTTP at a base URL: another
// fakepds's PLCURL, or any server with the public directory's API. Its
// answers map back to Directory's errors: 404 is ErrNotFound, 410
// ErrTombstoned, a refused operation an *OpError with the directory's
// status and message. go-didplc's Client has no /data or /log/last and
// keeps no message, so it does not serve here.
type Remote struct {
	base   string
	client *http.Client
}

// maxAnswer bounds what Remote reads of one answer: a document, an
// operation or an error message is a few KiB.
const maxAnswer = 1 << 20

// NewRemote is the directory at base ("http://localhost:2582"), asked
// with client (http.DefaultClient when nil).
func NewRemote(base string, client *http.Client) *Remote {
	if client == nil {
		client = http.DefaultClient
	}
	return &Remote{base: strings.TrimSuffix(base, "/"), client: client}
}

// URL is the directory's base URL.
func (r *Remote) URL() string { return r.base }

func (r *Remote) Resolve(ctx context.Context, did syntax.DID) (*Document, error) {
	var doc Document
	if err := r.get(ctx, "/"+did.String(), &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

func (r *Remote) Data(ctx context.Context, did syntax.DID) (*Data, error) {
	var data Data
	if err := r.get(ctx, "/"+did.String()+"/data", &data); err != nil {
		return nil, err
	}
	return &data, nil
}

func (r *Remote) Last(ctx context.Context, did syntax.DID) (didplc.Operation, error) {
	var raw json.RawMessage
	if err := r.get(ctx, "/"+did.String()+"/log/last", &raw); err != nil {
		return nil, err
	}
	op, err := decodeOp(raw)
	if err != nil {
		return nil, fmt.Errorf("plc: %s: last operation of %s: %w", r.base, did, err)
	}
	return op, nil
}

// Submit posts op. A refusal is an *OpError with the directory's status
// and message; its Kind is read back from the message where the
// directory's own refusals name it, ErrInvalidOperation otherwise.
func (r *Remote) Submit(ctx context.Context, did syntax.DID, op didplc.Operation) error {
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/"+did.String(), bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("plc: %s: %w", r.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		return nil
	}
	msg := message(resp)
	return &OpError{Kind: kindOf(msg), Status: resp.StatusCode, Message: msg}
}

func (r *Remote) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("plc: %s: %w", r.base, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusGone:
		return ErrTombstoned
	default:
		return fmt.Errorf("plc: %s: GET %s: %d %s", r.base, path, resp.StatusCode, message(resp))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(v); err != nil {
		return fmt.Errorf("plc: %s: GET %s: %w", r.base, path, err)
	}
	return nil
}

// message is the {"message": ...} of an error answer, or its body.
func message(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &m) == nil && m.Message != "" {
		return m.Message
	}
	return strings.TrimSpace(string(b))
}

// kindOf names the kind of a refusal by the messages Submit writes.
func kindOf(msg string) error {
	for _, k := range []struct {
		prefix string
		kind   error
	}{
		{"Invalid signature on op", ErrInvalidSignature},
		{"Operations not correctly ordered", ErrMisordered},
		{"Hash of genesis operation does not match DID identifier", ErrGenesisHash},
		{"Recovery operation occurred outside of the allowed 72 hr recovery window", ErrLateRecovery},
		{"To many operations within last", ErrRateLimited},
	} {
		if strings.HasPrefix(msg, k.prefix) {
			return k.kind
		}
	}
	return ErrInvalidOperation
}
