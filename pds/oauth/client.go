package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// clientMetadata is an OAuth client metadata document (RFC 7591 fields
// atproto uses).
type clientMetadata struct {
	ClientID                    string          `json:"client_id"`
	ClientName                  string          `json:"client_name,omitempty"`
	ClientURI                   string          `json:"client_uri,omitempty"`
	LogoURI                     string          `json:"logo_uri,omitempty"`
	TosURI                      string          `json:"tos_uri,omitempty"`
	PolicyURI                   string          `json:"policy_uri,omitempty"`
	ApplicationType             string          `json:"application_type,omitempty"`
	GrantTypes                  []string        `json:"grant_types,omitempty"`
	ResponseTypes               []string        `json:"response_types,omitempty"`
	RedirectURIs                []string        `json:"redirect_uris"`
	Scope                       string          `json:"scope,omitempty"`
	TokenEndpointAuthMethod     string          `json:"token_endpoint_auth_method,omitempty"`
	TokenEndpointAuthSigningAlg string          `json:"token_endpoint_auth_signing_alg,omitempty"`
	RequestObjectSigningAlg     string          `json:"request_object_signing_alg,omitempty"`
	DPoPBoundAccessTokens       *bool           `json:"dpop_bound_access_tokens,omitempty"`
	JWKS                        json.RawMessage `json:"jwks,omitempty"`
	JWKSURI                     string          `json:"jwks_uri,omitempty"`
	SubjectType                 string          `json:"subject_type,omitempty"`

	// OIDC and RFC 7591 options the reference refuses.
	DefaultMaxAge                     any  `json:"default_max_age,omitempty"`
	UserinfoSignedResponseAlg         any  `json:"userinfo_signed_response_alg,omitempty"`
	IDTokenSignedResponseAlg          any  `json:"id_token_signed_response_alg,omitempty"`
	UserinfoEncryptedResponseAlg      any  `json:"userinfo_encrypted_response_alg,omitempty"`
	AuthorizationEncryptedResponseEnc any  `json:"authorization_encrypted_response_enc,omitempty"`
	TLSClientCertBoundAccessTokens    bool `json:"tls_client_certificate_bound_access_tokens,omitempty"`
}

// client is a resolved, validated client.
type client struct {
	ID       string
	Meta     clientMetadata
	Loopback bool // the http://localhost development client
	jwks     []*publicJWK
}

func (c *client) confidential() bool { return c.Meta.TokenEndpointAuthMethod == "private_key_jwt" }

// name is what the consent page calls the client.
func (c *client) name() string {
	if c.Meta.ClientName != "" {
		return c.Meta.ClientName
	}
	if c.Loopback {
		return "Loopback client (development)"
	}
	if u, err := url.Parse(c.ID); err == nil {
		return u.Host
	}
	return c.ID
}

// sessionLimits are how long a family lives from its creation and from its
// last refresh: longer for confidential clients, as the reference.
func (c *client) sessionLimits() (session, refresh time.Duration) {
	if c.confidential() {
		return sessionLifetimeLong, refreshLifetimeLong
	}
	return sessionLifetime, refreshLifetime
}

// clientCache keeps fetched metadata documents for a minute: long enough
// for one login's PAR, page and token calls, short enough that a test
// changing a document at the same URL soon sees it.
type clientCache struct {
	p  *Provider
	mu sync.Mutex
	m  map[string]cachedClient
}

type cachedClient struct {
	c   *client
	err error
	at  time.Time
}

const (
	clientCacheTTL   = time.Minute
	clientCacheMax   = 256
	metadataMaxBytes = 64 << 10
)

func newClientCache(p *Provider) *clientCache {
	return &clientCache{p: p, m: make(map[string]cachedClient)}
}

// get resolves a client id: the loopback development client's metadata
// is built from the id itself, any other is fetched from its URL.
func (cc *clientCache) get(ctx context.Context, id string) (*client, error) {
	if id == "" {
		return nil, errInvalidRequest(`Missing "client_id" parameter`)
	}
	if isLoopbackClientID(id) {
		return loopbackClient(id)
	}
	now := cc.p.realNow()
	cc.mu.Lock()
	if e, ok := cc.m[id]; ok && now.Sub(e.at) < clientCacheTTL {
		cc.mu.Unlock()
		return e.c, e.err
	}
	cc.mu.Unlock()
	c, err := cc.p.fetchClient(ctx, id)
	cc.mu.Lock()
	if len(cc.m) >= clientCacheMax {
		for k, e := range cc.m {
			if now.Sub(e.at) >= clientCacheTTL || len(cc.m) >= clientCacheMax {
				delete(cc.m, k)
			}
		}
	}
	cc.m[id] = cachedClient{c: c, err: err, at: now}
	cc.mu.Unlock()
	return c, err
}

// isLoopbackClientID: the origin is exactly http://localhost (no port) and
// the path empty or "/" (atproto OAuth spec, "Localhost Client
// Development").
func isLoopbackClientID(id string) bool {
	return id == "http://localhost" || strings.HasPrefix(id, "http://localhost?") ||
		strings.HasPrefix(id, "http://localhost/")
}

func loopbackClient(id string) (*client, error) {
	u, err := url.Parse(id)
	if err != nil || u.Port() != "" || u.User != nil || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return nil, errClientMetadata(`Invalid loopback client id "%s"`, id)
	}
	q := u.Query()
	for k := range q {
		if k != "scope" && k != "redirect_uri" {
			return nil, errClientMetadata(`Invalid loopback client id "%s": unexpected query parameter "%s"`, id, k)
		}
	}
	scope := "atproto"
	if s, ok := q["scope"]; ok {
		if len(s) != 1 {
			return nil, errClientMetadata(`Invalid loopback client id "%s": "scope" must be given once`, id)
		}
		scope = s[0]
	}
	if !slices.Contains(strings.Split(scope, " "), "atproto") {
		return nil, errClientMetadata(`Invalid loopback client id "%s": ATProto Loopback ClientID must include "atproto" scope`, id)
	}
	redirects := q["redirect_uri"]
	if len(redirects) == 0 {
		redirects = []string{"http://127.0.0.1/", "http://[::1]/"}
	}
	for _, r := range redirects {
		ru, err := url.Parse(r)
		if err != nil || ru.Scheme != "http" || !isLoopbackIP(ru.Hostname()) {
			return nil, errClientMetadata(`Invalid loopback client id "%s": redirect_uri must be http on 127.0.0.1 or [::1]`, id)
		}
	}
	yes := true
	c := &client{ID: id, Loopback: true, Meta: clientMetadata{
		ClientID: id, Scope: scope, RedirectURIs: redirects,
		ResponseTypes: []string{"code"}, GrantTypes: []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethod: "none", ApplicationType: "native", DPoPBoundAccessTokens: &yes,
	}}
	return c, validateClient(c)
}

func isLoopbackIP(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// discoverableURL checks a client id that names its metadata document:
// https, or plain http on a loopback host (fakepds's allowance: clients
// under test live on localhost), with a path and no fragment.
func discoverableURL(id string) (*url.URL, error) {
	u, err := url.Parse(id)
	if err != nil || u.Host == "" {
		return nil, errClientMetadata(`Invalid client ID "%s"`, id)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && (isLoopbackIP(u.Hostname()) || u.Hostname() == "localhost"):
	default:
		return nil, errClientMetadata(`Invalid client ID "%s"`, id)
	}
	if u.User != nil || u.Fragment != "" || u.Path == "" || u.Path == "/" {
		return nil, errClientMetadata(`Invalid client ID "%s"`, id)
	}
	return u, nil
}

func (p *Provider) fetchClient(ctx context.Context, id string) (*client, error) {
	u, err := discoverableURL(id)
	if err != nil {
		return nil, err
	}
	var meta clientMetadata
	if err := p.fetchJSON(ctx, u.String(), &meta); err != nil {
		return nil, errClientMetadata(`Unable to obtain client metadata for "%s": %v`, id, err)
	}
	c := &client{ID: id, Meta: meta}
	if meta.ClientID != id {
		return nil, errClientMetadata("client_id does not match")
	}
	if err := validateClient(c); err != nil {
		return nil, err
	}
	if c.confidential() {
		raw := []byte(meta.JWKS)
		if meta.JWKSURI != "" {
			var doc json.RawMessage
			if err := p.fetchJSON(ctx, meta.JWKSURI, &doc); err != nil {
				return nil, errClientMetadata("Unable to fetch jwks_uri: %v", err)
			}
			raw = doc
		}
		var set struct {
			Keys []json.RawMessage `json:"keys"`
		}
		if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) == 0 {
			return nil, errClientMetadata("private_key_jwt auth method requires at least one key in jwks")
		}
		for _, kr := range set.Keys {
			k, err := parseJWK(kr)
			if err != nil {
				return nil, errClientMetadata("Invalid key in jwks: %v", err)
			}
			c.jwks = append(c.jwks, k)
		}
	}
	return c, nil
}

func (p *Provider) fetchJSON(ctx context.Context, u string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("unexpected status %d", resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return fmt.Errorf("unexpected content type %q", resp.Header.Get("Content-Type"))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, metadataMaxBytes+1))
	if err != nil {
		return err
	}
	if len(b) > metadataMaxBytes {
		return fmt.Errorf("document over %d bytes", metadataMaxBytes)
	}
	return json.Unmarshal(b, out)
}

// validateClient applies the reference's checks (ClientManager's
// validateClientMetadata), with its messages, after filling in the RFC 7591
// defaults.
func validateClient(c *client) error {
	m := &c.Meta
	if m.ApplicationType == "" {
		m.ApplicationType = "web"
	}
	if m.GrantTypes == nil {
		m.GrantTypes = []string{"authorization_code"}
	}
	if m.ResponseTypes == nil {
		m.ResponseTypes = []string{"code"}
	}
	if m.TokenEndpointAuthMethod == "" {
		m.TokenEndpointAuthMethod = "client_secret_basic"
	}
	if m.ApplicationType != "web" && m.ApplicationType != "native" {
		return errClientMetadata(`Invalid "application_type"`)
	}
	if len(m.JWKS) > 0 && m.JWKSURI != "" {
		return errClientMetadata("jwks_uri and jwks are mutually exclusive")
	}
	for k, v := range map[string]any{
		"default_max_age": m.DefaultMaxAge, "userinfo_signed_response_alg": m.UserinfoSignedResponseAlg,
		"id_token_signed_response_alg": m.IDTokenSignedResponseAlg, "userinfo_encrypted_response_alg": m.UserinfoEncryptedResponseAlg,
	} {
		if v != nil {
			return errClientMetadata(`Unsupported "%s" parameter`, k)
		}
	}
	if m.ClientURI != "" {
		if u, err := url.Parse(m.ClientURI); err != nil || u.Hostname() == "localhost" || isLoopbackIP(u.Hostname()) {
			if !c.Loopback {
				return errClientMetadata("client_uri hostname is invalid")
			}
		}
	}
	if m.Scope == "" {
		return errClientMetadata("Missing scope property")
	}
	scopes := strings.Split(m.Scope, " ")
	if !slices.Contains(scopes, "atproto") {
		return errClientMetadata(`Missing "atproto" scope`)
	}
	if d := duplicate(scopes); d != "" {
		return errClientMetadata(`Duplicate scope "%s"`, d)
	}
	if d := duplicate(m.GrantTypes); d != "" {
		return errClientMetadata(`Duplicate grant type "%s"`, d)
	}
	for _, g := range m.GrantTypes {
		switch g {
		case "implicit":
			return errClientMetadata(`Grant type "%s" is not allowed`, g)
		case "authorization_code", "refresh_token":
		default:
			return errClientMetadata(`Grant type "%s" is not supported`, g)
		}
	}
	if m.SubjectType != "" && m.SubjectType != "public" {
		return errClientMetadata(`Only "public" subject_type is supported`)
	}
	switch m.TokenEndpointAuthMethod {
	case "none":
		if m.TokenEndpointAuthSigningAlg != "" {
			return errClientMetadata(`token_endpoint_auth_method "none" must not have token_endpoint_auth_signing_alg`)
		}
	case "private_key_jwt":
		if len(m.JWKS) == 0 && m.JWKSURI == "" {
			return errClientMetadata("private_key_jwt auth method requires jwks or jwks_uri")
		}
		if m.TokenEndpointAuthSigningAlg == "" {
			return errClientMetadata("Missing token_endpoint_auth_signing_alg client metadata")
		}
	default:
		return errClientMetadata(`Unsupported client authentication method "%s". Make sure "token_endpoint_auth_method" is set to one of: "none", "private_key_jwt"`, m.TokenEndpointAuthMethod)
	}
	if m.AuthorizationEncryptedResponseEnc != nil {
		return errClientMetadata("Encrypted authorization response is not supported")
	}
	if m.TLSClientCertBoundAccessTokens {
		return errClientMetadata("Mutual-TLS bound access tokens are not supported")
	}
	if m.DPoPBoundAccessTokens == nil || !*m.DPoPBoundAccessTokens {
		return errClientMetadata(`"dpop_bound_access_tokens" must be true`)
	}
	if !slices.Contains(m.ResponseTypes, "code") {
		return errClientMetadata(`response_types must include "code"`)
	}
	if !slices.Contains(m.GrantTypes, "authorization_code") {
		return errClientMetadata(`The "code" response type requires that "grant_types" contains "authorization_code"`)
	}
	if len(m.RedirectURIs) == 0 {
		return errClientMetadata("At least one redirect_uri is required")
	}
	if m.ApplicationType == "native" && m.TokenEndpointAuthMethod != "none" {
		return errClientMetadata(`Native clients must authenticate using "none" method`)
	}
	for _, r := range m.RedirectURIs {
		if err := validRedirect(c, r); err != nil {
			return err
		}
	}
	return nil
}

// validRedirect: https anywhere; http only on a loopback IP (RFC 8252
// 7.3, which is also where every app under test listens); a private-use
// scheme for native apps.
func validRedirect(c *client, r string) error {
	u, err := url.Parse(r)
	if err != nil || u.Scheme == "" {
		return oerr(400, "invalid_redirect_uri", "Invalid redirect URI %q", r)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if u.Hostname() == "localhost" {
			return oerr(400, "invalid_redirect_uri", `Loopback redirect URI %s is not allowed (use explicit IPs instead)`, r)
		}
		if !isLoopbackIP(u.Hostname()) {
			return oerr(400, "invalid_redirect_uri", "Redirect URI %s must use https (http is allowed on loopback IPs only)", r)
		}
		return nil
	default:
		if c.Meta.ApplicationType != "native" || !strings.Contains(u.Scheme, ".") {
			return oerr(400, "invalid_redirect_uri", "Private-use URI scheme redirect URI %s is only allowed for native apps, with a reverse-domain scheme", r)
		}
		return nil
	}
}

// redirectAllowed says whether the PAR's redirect_uri is one the client
// registered, exactly: the reference does not apply RFC 8252's any-port
// rule to loopback redirects either.
func (c *client) redirectAllowed(r string) bool { return slices.Contains(c.Meta.RedirectURIs, r) }

func duplicate(xs []string) string {
	seen := make(map[string]bool, len(xs))
	for _, x := range xs {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// authenticate checks how a request's client authenticates: nothing for a
// public client, a private_key_jwt assertion for a confidential one.
func (p *Provider) authenticate(ctx context.Context, form url.Values) (*client, clientAuth, error) {
	c, err := p.clients.get(ctx, form.Get("client_id"))
	if err != nil {
		return nil, clientAuth{}, err
	}
	typ, assertion := form.Get("client_assertion_type"), form.Get("client_assertion")
	if !c.confidential() {
		if typ != "" || assertion != "" {
			return nil, clientAuth{}, errInvalidClient(`Client authentication method "none" does not accept a client assertion`)
		}
		return c, clientAuth{Method: "none"}, nil
	}
	if typ == "" {
		return nil, clientAuth{}, errInvalidClient(`client_assertion_type required for "private_key_jwt"`)
	}
	if typ != assertionType {
		return nil, clientAuth{}, errInvalidClient("Unsupported client_assertion_type %s", typ)
	}
	j, err := parseJWS(assertion)
	if err != nil {
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: %v`, err)
	}
	if j.header.Alg != c.Meta.TokenEndpointAuthSigningAlg {
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: "alg" must be %s`, c.Meta.TokenEndpointAuthSigningAlg)
	}
	if j.header.Kid == "" {
		return nil, clientAuth{}, errInvalidClient(`"kid" required in client_assertion`)
	}
	var key *publicJWK
	for _, k := range c.jwks {
		if k.Kid == j.header.Kid && (k.Use == "" || k.Use == "sig") {
			key = k
			break
		}
	}
	if key == nil {
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: no key matching "kid" %s`, j.header.Kid)
	}
	if err := key.verify(j); err != nil {
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: %v`, err)
	}
	payload := j.payload
	var cl struct {
		Iss, Sub, Jti string
		Aud           any
		Exp, Iat      *float64
	}
	if err := json.Unmarshal(payload, &cl); err != nil {
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: invalid claims`)
	}
	now := p.realNow()
	switch {
	case cl.Iss != c.ID:
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: unexpected "iss" claim value`)
	case cl.Sub != c.ID:
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: unexpected "sub" claim value`)
	case !audienceHas(cl.Aud, p.issuer()):
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: unexpected "aud" claim value`)
	case cl.Jti == "":
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: "jti" claim missing`)
	case cl.Iat == nil || now.Sub(time.Unix(int64(*cl.Iat), 0)) > clientAssertionMaxAge+dpopTolerance ||
		time.Unix(int64(*cl.Iat), 0).After(now.Add(dpopTolerance)):
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: "iat" claim timestamp check failed`)
	case cl.Exp != nil && !now.Before(time.Unix(int64(*cl.Exp), 0).Add(dpopTolerance)):
		return nil, clientAuth{}, errInvalidClient(`Validation of "client_assertion" failed: "exp" claim timestamp check failed`)
	}
	if !p.replay.unique("assertion:" + c.ID + ":" + cl.Jti) {
		return nil, clientAuth{}, errInvalidClient("Client assertion jti replayed")
	}
	jkt, err := key.thumbprint()
	if err != nil {
		return nil, clientAuth{}, errInvalidClient("Client key thumbprint failed")
	}
	return c, clientAuth{Method: "private_key_jwt", KID: j.header.Kid, JKT: jkt}, nil
}

func audienceHas(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		for _, x := range a {
			if s, _ := x.(string); s == want {
				return true
			}
		}
	}
	return false
}

// sameAuth: a request must authenticate as the session it continues did,
// with the same key (the reference's validateClientAuth).
func sameAuth(was, now clientAuth) error {
	if was.Method != now.Method {
		return errInvalidGrant("Client authentication method mismatch (expected %s, got %s)", was.Method, now.Method)
	}
	if was.Method == "private_key_jwt" && was.JKT != now.JKT {
		return errInvalidGrant("The session was initiated with a different key than the client assertion currently used")
	}
	return nil
}
