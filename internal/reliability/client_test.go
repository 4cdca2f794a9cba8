package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// client calls XRPC methods by hand, so a test sees every answer's status
// (a 5xx is a finding, not an error to retry) and can call from any
// goroutine without testing.T.
type client struct {
	base string
	hc   *http.Client
}

func newClient(base string) *client {
	return &client{base: base, hc: &http.Client{
		Timeout:   time.Minute, // a hung server fails the call instead of the test run
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}}
}

// xrpcError is a non-2xx answer.
type xrpcError struct {
	Status        int
	Name, Message string
}

func (e *xrpcError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Name, e.Message) }

// call sends a query (body nil) or procedure and decodes a JSON answer into
// out, or returns the raw body when out is a *[]byte.
func (c *client) call(ctx context.Context, nsid, token string, params url.Values, body, out any) error {
	method, u := http.MethodGet, c.base+"/xrpc/"+nsid
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &xrpcError{Status: resp.StatusCode}
		var env struct{ Error, Message string }
		if json.Unmarshal(b, &env) == nil {
			e.Name, e.Message = env.Error, env.Message
		}
		return e
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*o = b
		return nil
	}
	return json.Unmarshal(b, out)
}

// account is an account a test made, with its access token.
type account struct {
	DID, Handle, Token string
}

// uniqueHandle is a fresh handle under .test, within its 18-character label.
func uniqueHandle(prefix string) string {
	return prefix + strings.ReplaceAll(uuid.NewString(), "-", "")[:10] + ".test"
}

func (c *client) createAccount(ctx context.Context, handle string) (account, error) {
	var out struct{ Did, Handle, AccessJwt string }
	err := c.call(ctx, "com.atproto.server.createAccount", "", nil, map[string]string{
		"handle": handle, "email": strings.TrimSuffix(handle, ".test") + "-" + uuid.NewString()[:8] + "@example.com", "password": "pw-" + handle,
	}, &out)
	return account{DID: out.Did, Handle: out.Handle, Token: out.AccessJwt}, err
}

// written is a write's answer: the record (none for a delete) and the
// commit that holds it.
type written struct {
	URI, CID string
	Commit   struct{ CID, Rev string }
}

// post is a valid app.bsky.feed.post.
func post(text string) map[string]any {
	return map[string]any{"$type": "app.bsky.feed.post", "text": text, "createdAt": time.Now().UTC().Format(time.RFC3339Nano)}
}

func (c *client) createRecord(ctx context.Context, a account, rkey string, record any, swapCommit string) (written, error) {
	in := map[string]any{"repo": a.DID, "collection": "app.bsky.feed.post", "record": record}
	if rkey != "" {
		in["rkey"] = rkey
	}
	if swapCommit != "" {
		in["swapCommit"] = swapCommit
	}
	var out written
	err := c.call(ctx, "com.atproto.repo.createRecord", a.Token, nil, in, &out)
	return out, err
}

func (c *client) putRecord(ctx context.Context, a account, rkey string, record any) (written, error) {
	var out written
	err := c.call(ctx, "com.atproto.repo.putRecord", a.Token, nil, map[string]any{
		"repo": a.DID, "collection": "app.bsky.feed.post", "rkey": rkey, "record": record,
	}, &out)
	return out, err
}

func (c *client) deleteRecord(ctx context.Context, a account, rkey string) (written, error) {
	var out written
	err := c.call(ctx, "com.atproto.repo.deleteRecord", a.Token, nil, map[string]any{
		"repo": a.DID, "collection": "app.bsky.feed.post", "rkey": rkey,
	}, &out)
	return out, err
}

// listed is one record of listRecords.
type listed struct{ URI, CID string }

// listAll is every post of a repo, through listRecords' pages.
func (c *client) listAll(ctx context.Context, did string) ([]listed, error) {
	var all []listed
	cursor := ""
	for {
		q := url.Values{"repo": {did}, "collection": {"app.bsky.feed.post"}, "limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var out struct {
			Records []listed
			Cursor  string
		}
		if err := c.call(ctx, "com.atproto.repo.listRecords", "", q, nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Records...)
		if out.Cursor == "" || len(out.Records) == 0 {
			return all, nil
		}
		cursor = out.Cursor
	}
}

func (c *client) getRepo(ctx context.Context, did string) ([]byte, error) {
	var car []byte
	err := c.call(ctx, "com.atproto.sync.getRepo", "", url.Values{"did": {did}}, nil, &car)
	return car, err
}

func (c *client) latestCommit(ctx context.Context, did string) (cid, rev string, err error) {
	var out struct{ CID, Rev string }
	err = c.call(ctx, "com.atproto.sync.getLatestCommit", "", url.Values{"did": {did}}, nil, &out)
	return out.CID, out.Rev, err
}
