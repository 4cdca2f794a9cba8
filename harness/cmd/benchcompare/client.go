package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// client is the one low-overhead client every server is measured with:
// raw XRPC over keep-alive net/http. A call's time runs from sending the
// request to the last byte of the response; decoding JSON happens after,
// outside it, so the client's own cost is the request and the read.
type client struct {
	base  string
	hc    *http.Client
	buf   bytes.Buffer
	token string
	// record, when set, sees every successful response (the floor server
	// replays fakepds's).
	record func(nsid string, contentType string, body []byte)
}

func newTransport() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
	}
}

func newClient(base string, tr *http.Transport) *client {
	return &client{base: base, hc: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
}

// xrpcError is a non-2xx answer.
type xrpcError struct {
	nsid   string
	status int
	body   string
}

func (e *xrpcError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %.300s", e.nsid, e.status, e.body)
}

// call sends one XRPC request and returns the response body (valid until
// the next call) and the call's duration. in is JSON-encoded unless it
// is []byte, which is sent as is with contentType.
func (c *client) call(method, nsid string, query url.Values, in any, contentType string) ([]byte, time.Duration, error) {
	var body []byte
	switch v := in.(type) {
	case nil:
	case []byte:
		body = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, 0, err
		}
		body, contentType = b, "application/json"
	}
	u := c.base + "/xrpc/" + nsid
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return nil, 0, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	c.buf.Reset()
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", nsid, err)
	}
	_, err = c.buf.ReadFrom(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: reading the response: %w", nsid, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, 0, &xrpcError{nsid, resp.StatusCode, c.buf.String()}
	}
	if c.record != nil {
		c.record(nsid, resp.Header.Get("Content-Type"), c.buf.Bytes())
	}
	return c.buf.Bytes(), d, nil
}

// decode is call followed by decoding the JSON answer into out.
func (c *client) decode(method, nsid string, query url.Values, in any, out any) (time.Duration, error) {
	b, d, err := c.call(method, nsid, query, in, "")
	if err != nil {
		return 0, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, fmt.Errorf("%s: decoding %.200q: %w", nsid, b, err)
		}
	}
	return d, nil
}
