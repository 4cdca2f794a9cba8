package oauth

import (
	"errors"
	"html/template"
	"net/http"
	"strings"
)

// The sign-in and consent page: plain HTML forms, so a developer can log in
// to their app in a browser against `make run`, and a headless browser can
// drive it in CI. One request, two steps: sign in (handle or email and
// password), then allow or deny the client its scopes.
var pages = template.Must(template.New("").Parse(`
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}} - fakepds</title>
<style>
body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#1a1a1a}
h1{font-size:1.3rem} label{display:block;margin:.8rem 0 .2rem} input{width:100%;padding:.5rem;box-sizing:border-box}
button{margin:1rem .5rem 0 0;padding:.5rem 1.2rem} .err{color:#b00020} code{background:#f2f2f2;padding:0 .2rem}
ul{padding-left:1.2rem}
</style></head><body>{{end}}

{{define "request"}}<input type="hidden" name="request_uri" value="{{.RequestURI}}">
<input type="hidden" name="client_id" value="{{.ClientID}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">{{end}}

{{define "cancel"}}<form method="post" action="/oauth/authorize/consent">
{{template "request" .}}
<button id="cancel" name="decision" value="deny" type="submit" formnovalidate>Cancel</button>
</form>{{end}}

{{define "signin"}}{{template "head" .}}
<h1>Sign in to {{.ClientName}}</h1>
<p><code>{{.ClientID}}</code> asks to use your account on this fakepds.</p>
{{if .Error}}<p class="err" id="error">{{.Error}}</p>{{end}}
<form method="post" action="/oauth/authorize/sign-in">
{{template "request" .}}
<label for="identifier">Handle or email</label>
<input id="identifier" name="identifier" autocomplete="username" value="{{.Hint}}" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button id="sign-in" type="submit">Sign in</button>
</form>
{{template "cancel" .}}
</body></html>{{end}}

{{define "signup"}}{{template "head" .}}
<h1>Create an account for {{.ClientName}}</h1>
<p><code>{{.ClientID}}</code> asks you to create an account on this fakepds.</p>
{{if .Error}}<p class="err" id="error">{{.Error}}</p>{{end}}
<form method="post" action="/oauth/authorize/sign-up">
{{template "request" .}}
<label for="handle">Handle</label>
<input id="handle" name="handle" autocomplete="username" value="{{.Hint}}" required>
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="email" value="{{.Email}}" required>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="new-password" required>
{{if .InviteRequired}}<label for="invite">Invite code</label>
<input id="invite" name="invite_code" required>{{end}}
<button id="sign-up" type="submit">Create account</button>
</form>
{{template "cancel" .}}
</body></html>{{end}}

{{define "consent"}}{{template "head" .}}
<h1>Allow {{.ClientName}}?</h1>
<p>Signed in as <strong id="account">{{.Handle}}</strong>.</p>
<p><code>{{.ClientID}}</code> asks for:</p>
<ul id="scopes">{{range .Scopes}}<li><code>{{.}}</code></li>{{end}}</ul>
<form method="post" action="/oauth/authorize/consent">
{{template "request" .}}
<button id="allow" name="decision" value="allow" type="submit">Allow</button>
<button id="deny" name="decision" value="deny" type="submit">Deny</button>
</form>
</body></html>{{end}}

{{define "error"}}{{template "head" .}}
<h1>Authorization failed</h1>
<p class="err" id="error">{{.Error}}</p>
</body></html>{{end}}

{{define "form_post"}}<!doctype html>
<html><head><meta charset="utf-8"><title>Redirecting</title></head>
<body onload="document.forms[0].submit()">
<form method="post" action="{{.Action}}">{{range $k, $v := .Fields}}<input type="hidden" name="{{$k}}" value="{{$v}}">{{end}}
<noscript><button type="submit">Continue</button></noscript></form>
</body></html>{{end}}
`))

type pageData struct {
	Title, ClientName, ClientID, RequestURI, CSRF, Hint, Error, Handle, Email string
	Scopes                                                                    []string
	InviteRequired                                                            bool
}

func (p *Provider) render(w http.ResponseWriter, status int, name string, d any) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' *; script-src 'unsafe-inline'")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, d); err != nil {
		p.log.Warn("oauth: page", "err", err)
	}
}

func (p *Provider) errorPage(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		p.log.Error("oauth: authorize page", "err", err)
		e = oerr(500, "server_error", "Server error")
	}
	p.render(w, e.Status, "error", pageData{Title: "Error", Error: e.Description})
}

// authorizePage is GET /oauth/authorize?client_id&request_uri: the sign-in
// step of a pushed request.
func (p *Provider) authorizePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req, c, err := p.pending(r.Context(), q.Get("client_id"), q.Get("request_uri"))
	if err != nil {
		p.errorPage(w, err)
		return
	}
	page := "signin"
	if req.Params.Prompt == "create" {
		page = "signup"
	}
	p.render(w, http.StatusOK, page, p.pageFor(req, c))
}

func (p *Provider) pageFor(req *request, c *client) pageData {
	return pageData{
		Title: "Sign in", ClientName: c.name(), ClientID: c.ID, RequestURI: requestURIPrefix + req.ID,
		CSRF: req.CSRF, Hint: req.Params.LoginHint, Scopes: strings.Split(req.Params.Scope, " "),
		InviteRequired: p.opts.InviteRequired,
	}
}

// formRequest loads the pending request a posted form names and checks its
// CSRF value (bound to the request, so a form cannot be replayed on
// another).
func (p *Provider) formRequest(w http.ResponseWriter, r *http.Request) (*request, *client, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		p.errorPage(w, errInvalidRequest("Invalid form"))
		return nil, nil, false
	}
	req, c, err := p.pending(r.Context(), r.PostForm.Get("client_id"), r.PostForm.Get("request_uri"))
	if err != nil {
		p.errorPage(w, err)
		return nil, nil, false
	}
	if r.PostForm.Get("csrf") != req.CSRF {
		p.errorPage(w, errInvalidRequest("Invalid CSRF token"))
		return nil, nil, false
	}
	return req, c, true
}

func (p *Provider) signInForm(w http.ResponseWriter, r *http.Request) {
	req, c, ok := p.formRequest(w, r)
	if !ok {
		return
	}
	d := p.pageFor(req, c)
	id := strings.TrimPrefix(strings.TrimSpace(r.PostForm.Get("identifier")), "@")
	acc, err := p.opts.Accounts.SignIn(r.Context(), id, r.PostForm.Get("password"))
	if err != nil {
		d.Hint = id
		d.Error = "Invalid identifier or password"
		if !errors.Is(err, ErrBadCredentials) {
			var e *Error
			if errors.As(err, &e) {
				d.Error = e.Description
			} else {
				p.errorPage(w, err)
				return
			}
		}
		p.render(w, http.StatusUnauthorized, "signin", d)
		return
	}
	p.consentPage(w, r, req, acc, d)
}

// signUpForm is the sign-up of a prompt=create request: the account is
// made as createAccount makes it, then signed in to the request.
func (p *Provider) signUpForm(w http.ResponseWriter, r *http.Request) {
	req, c, ok := p.formRequest(w, r)
	if !ok {
		return
	}
	d := p.pageFor(req, c)
	f := r.PostForm
	handle := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(f.Get("handle")), "@"))
	acc, err := p.opts.Accounts.CreateAccount(r.Context(), handle, strings.TrimSpace(f.Get("email")), f.Get("password"), strings.TrimSpace(f.Get("invite_code")))
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			p.errorPage(w, err)
			return
		}
		d.Title, d.Hint, d.Email, d.Error = "Create an account", handle, f.Get("email"), e.Description
		p.render(w, e.Status, "signup", d)
		return
	}
	p.consentPage(w, r, req, acc, d)
}

// consentPage signs acc in to the request and asks for its consent.
func (p *Provider) consentPage(w http.ResponseWriter, r *http.Request, req *request, acc Account, d pageData) {
	if err := p.db.signIn(r.Context(), req.ID, acc.DID); err != nil {
		p.errorPage(w, err)
		return
	}
	d.Title, d.Handle = "Authorize", acc.Handle
	p.render(w, http.StatusOK, "consent", d)
}

func (p *Provider) consentForm(w http.ResponseWriter, r *http.Request) {
	req, _, ok := p.formRequest(w, r)
	if !ok {
		return
	}
	deny := r.PostForm.Get("decision") != "allow"
	if !deny && req.DID == "" {
		p.errorPage(w, oerr(400, "access_denied", "Sign in first"))
		return
	}
	dest, err := p.finish(r.Context(), req, deny)
	if err != nil {
		p.errorPage(w, err)
		return
	}
	if req.Params.ResponseMode == "form_post" {
		fields := map[string]string{}
		for k, v := range dest.Query() {
			fields[k] = v[0]
		}
		dest.RawQuery = ""
		p.render(w, http.StatusOK, "form_post", map[string]any{"Action": dest.String(), "Fields": fields})
		return
	}
	http.Redirect(w, r, dest.String(), http.StatusSeeOther)
}
