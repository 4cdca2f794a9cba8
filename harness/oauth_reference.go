package harness

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
)

// On a PDS without fakepds's control plane (the reference backend),
// AuthorizeOAuth and DenyOAuth do what the reference's authorization page
// (npm @atproto/oauth-provider's React app) does in a browser: load the
// page (which sets the device and CSRF cookies), call its JSON API
// (sign-in without "remember me", which answers an ephemeral token, then
// consent or reject), and follow the redirect URL the API answers to the
// app's redirect URI. The headers are the ones a browser sends: the API
// refuses requests that are not same-origin fetches from the authorize
// page.

// refAPI is the reference provider's API prefix (oauth-provider-api's
// API_ENDPOINT_PREFIX).
const refAPI = "/@atproto/oauth-provider/~api"

// refBrowser is one browser session on the reference's authorization
// page: its cookies (kept by hand: the reference marks them Secure, and a
// test PDS is plain http, so net/http/cookiejar would not send them back).
type refBrowser struct {
	ctx       context.Context
	client    *http.Client
	page      *url.URL // the authorize URL, the API calls' Referer
	origin    string
	cookies   map[string]string
	userAgent string
}

func newRefBrowser(ctx context.Context, authorizeURL string) (*refBrowser, error) {
	u, err := url.Parse(authorizeURL)
	if err != nil {
		return nil, err
	}
	return &refBrowser{
		ctx: ctx, page: u, origin: u.Scheme + "://" + u.Host, cookies: map[string]string{},
		userAgent: "fakepds-harness",
		client: &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}, nil
}

func (b *refBrowser) send(method, target string, body any, headers map[string]string) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(b.ctx, method, target, rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("User-Agent", b.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	var cookies []string
	for k, v := range b.cookies {
		cookies = append(cookies, k+"="+v)
	}
	if len(cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(cookies, "; "))
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 || c.Value == "" {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c.Value
		}
	}
	return resp, data, nil
}

// navigate is a top-level navigation, as the browser makes it (from the
// app for the authorize page, from the page itself for the redirect).
func (b *refBrowser) navigate(target, site string, referer bool) (*http.Response, error) {
	h := map[string]string{"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Sec-Fetch-Site": site}
	if referer {
		h["Referer"] = b.page.String()
	}
	resp, body, err := b.send(http.MethodGet, target, nil, h)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		return nil, fmt.Errorf("GET %s: %s: %s", target, resp.Status, bytes.TrimSpace(body))
	}
	return resp, nil
}

// api calls the page's API as its script does (a same-origin fetch with
// the CSRF header), decoding the JSON answer into out.
func (b *refBrowser) api(endpoint string, body any, bearer string, out any) error {
	h := map[string]string{
		"Sec-Fetch-Mode": "same-origin", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Dest": "empty",
		"Origin": b.origin, "Referer": b.page.String(), "X-CSRF-Token": b.cookies["csrf-token"],
	}
	if bearer != "" {
		h["Authorization"] = "Bearer " + bearer
	}
	resp, data, err := b.send(http.MethodPost, b.origin+refAPI+endpoint, body, h)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", endpoint, resp.Status, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

// referenceConsent signs the account in on the reference's authorization
// page and allows (or rejects) the request, returning the app's redirect
// URI with the code (or the error) as the browser would be sent there.
func referenceConsent(ctx context.Context, a *Account, authorizeURL string, deny bool) (*url.URL, error) {
	b, err := newRefBrowser(ctx, authorizeURL)
	if err != nil {
		return nil, err
	}
	if _, err := b.navigate(authorizeURL, "cross-site", false); err != nil {
		return nil, fmt.Errorf("the authorize page: %w", err)
	}
	if b.cookies["csrf-token"] == "" {
		return nil, fmt.Errorf("the authorize page set no csrf-token cookie: is %s the reference's OAuth provider?", b.origin)
	}
	var next struct {
		URL string `json:"url"`
	}
	if deny {
		if err := b.api("/reject", map[string]any{}, "", &next); err != nil {
			return nil, err
		}
	} else {
		var in struct {
			EphemeralToken string `json:"ephemeralToken"`
		}
		err := b.api("/sign-in", map[string]any{"locale": "en", "username": a.Handle.String(), "password": a.Password, "remember": false}, "", &in)
		if err != nil {
			return nil, fmt.Errorf("sign-in: %w", err)
		}
		if err := b.api("/consent", map[string]any{"did": a.DID.String()}, in.EphemeralToken, &next); err != nil {
			return nil, fmt.Errorf("consent: %w", err)
		}
	}
	// The API answers the provider's /oauth/authorize/redirect, which sends
	// the browser on to the app with a 303 (query and fragment modes).
	resp, err := b.navigate(next.URL, "same-origin", true)
	if err != nil {
		return nil, err
	}
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || loc == "" {
		return nil, fmt.Errorf("GET %s: %s without a redirect (response_mode form_post is not followed)", next.URL, resp.Status)
	}
	return url.Parse(loc)
}
