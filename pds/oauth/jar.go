package oauth

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Request objects (JAR, RFC 9101): a pushed authorization request may send
// its parameters as one signed JWT, "request", as the reference accepts
// them: signed with a key of the client's JWKS (so a public development
// client, which has none, is always refused), aud the issuer, at most
// 59 s old (JAR_MAX_AGE), with a jti never seen before.

const jarMaxAge = 59 * time.Second

// parFormError is the reference's schema check of a PAR body, made before
// the DPoP proof and the client: a request object that is no compact JWT,
// or a prompt it does not know.
func parFormError(f url.Values) error {
	const prefix = "Invalid authorization request: "
	if f.Has("request") {
		parts := strings.Split(f.Get("request"), ".")
		switch {
		case len(parts) != 3:
			return errInvalidRequest(prefix+"Invalid JWT format: expected 3 segments, got %d at body.request", len(parts))
		case parts[2] == "":
			return errInvalidRequest(prefix + "Invalid JWT format: last segment is too short at body.request")
		}
		return nil
	}
	switch p := f.Get("prompt"); p {
	case "", "none", "login", "consent", "select_account", "create":
	default:
		return errInvalidRequest(prefix+"Invalid enum value. Expected 'none' | 'login' | 'consent' | 'select_account' | 'create', received '%s' at body.prompt, or Required at body.request, or Required at body.request", p)
	}
	return nil
}

// requestObject verifies c's request object and returns the parameters it
// carries, as a form.
func (p *Provider) requestObject(c *client, token string) (url.Values, error) {
	bad := func(format string, args ...any) error {
		return errInvalidRequest(`Invalid "request" object: `+format, args...)
	}
	j, err := parseJWS(token)
	if err != nil {
		return nil, bad("%v", err)
	}
	if alg := c.Meta.RequestObjectSigningAlg; alg != "" && alg != j.header.Alg {
		return nil, bad(`"alg" (Algorithm) Header Parameter value not allowed`)
	}
	verified := false
	tried := false
	for _, k := range c.jwks {
		if (j.header.Kid != "" && k.Kid != j.header.Kid) || (k.Use != "" && k.Use != "sig") {
			continue
		}
		tried = true
		if k.verify(j) == nil {
			verified = true
			break
		}
	}
	switch {
	case !tried:
		return nil, bad("no applicable key found in the JSON Web Key Set")
	case !verified:
		return nil, bad("signature verification failed")
	}
	var claims map[string]any
	if err := json.Unmarshal(j.payload, &claims); err != nil {
		return nil, bad("JWT Claims Set must be a top-level JSON object")
	}
	now := p.realNow()
	num := func(k string) (time.Time, bool) {
		f, ok := claims[k].(float64)
		return time.Unix(int64(f), 0), ok
	}
	iat, hasIat := num("iat")
	exp, hasExp := num("exp")
	switch {
	case claims["aud"] != nil && !audienceHas(claims["aud"], p.issuer()):
		return nil, bad(`unexpected "aud" claim value`)
	case !hasIat:
		return nil, bad(`"iat" claim missing`)
	case now.Sub(iat) > jarMaxAge+dpopTolerance:
		return nil, bad(`"iat" claim timestamp check failed (too far in the past)`)
	case iat.After(now.Add(dpopTolerance)):
		return nil, bad(`"iat" claim timestamp check failed (it should be in the past)`)
	case hasExp && !now.Before(exp.Add(dpopTolerance)):
		return nil, bad(`"exp" claim timestamp check failed`)
	}
	jti, _ := claims["jti"].(string)
	if jti == "" {
		return nil, errInvalidRequest(`Request object payload must contain a "jti" claim`)
	}
	if !p.replay.unique("jar:" + c.ID + ":" + jti) {
		return nil, errInvalidRequest("Request object was replayed")
	}
	if id, ok := claims["client_id"].(string); ok && id != c.ID {
		return nil, errInvalidRequest(`"client_id" in the request object does not match the client`)
	}
	f := url.Values{}
	for k, v := range claims {
		switch v := v.(type) {
		case string:
			f.Set(k, v)
		case float64:
			f.Set(k, fmt.Sprint(v))
		}
	}
	return f, nil
}
