package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth"
	"github.com/bluesky-social/indigo/atproto/lexicon"
	"github.com/bluesky-social/indigo/atproto/syntax"
)

// Permission sets: an "include:<nsid>" scope grants what the lexicon
// <nsid>, a permission-set, lists. The reference resolves the lexicon over
// the network (DNS, then the authority's repo) when the request is pushed,
// and writes the token's scope with each include expanded into the repo:
// and rpc: permissions it allows; a test server has no network, so the
// PDS hands the provider a resolver (Options.PermissionSet) over the sets
// it knows.

// ErrNoLexicon is what a PermissionSet resolver returns for an NSID it
// cannot resolve.
var ErrNoLexicon = errors.New("oauth: lexicon not found")

// PermissionSetResolver finds the lexicon document an NSID names.
type PermissionSetResolver func(ctx context.Context, nsid string) (*lexicon.SchemaFile, error)

// ParsePermissionSet reads a lexicon document (JSON) whose main definition
// is a permission set, checked as indigo's lexicon package checks schemas.
func ParsePermissionSet(doc []byte) (*lexicon.SchemaFile, error) {
	var f lexicon.SchemaFile
	if err := json.Unmarshal(doc, &f); err != nil {
		return nil, fmt.Errorf("permission set: %w", err)
	}
	if err := f.FinishParse(); err != nil {
		return nil, fmt.Errorf("permission set %s: %w", f.ID, err)
	}
	if _, err := syntax.ParseNSID(f.ID); err != nil {
		return nil, fmt.Errorf("permission set: %w", err)
	}
	if _, err := permissionSetOf(&f); err != nil {
		return nil, fmt.Errorf("permission set %s: %w", f.ID, err)
	}
	return &f, nil
}

var errNotPermissionSet = errors.New("the main definition is not a permission-set")

// permissionSetOf is the document's main definition, when it is a
// permission set.
func permissionSetOf(f *lexicon.SchemaFile) (*lexicon.SchemaPermissionSet, error) {
	main, ok := f.Defs["main"]
	if !ok {
		return nil, errNotPermissionSet
	}
	set, ok := main.Inner.(lexicon.SchemaPermissionSet)
	if !ok {
		return nil, errNotPermissionSet
	}
	if err := set.CheckSchema(); err != nil {
		return nil, err
	}
	return &set, nil
}

// permissionSets resolves every include: scope of scope, with the
// reference's invalid_scope answers for one that does not resolve.
func (p *Provider) permissionSets(ctx context.Context, scope string) (map[string]*lexicon.SchemaPermissionSet, error) {
	sets := map[string]*lexicon.SchemaPermissionSet{}
	for _, s := range strings.Split(scope, " ") {
		inc, ok := includeScope(s)
		if !ok || sets[inc.NSID] != nil {
			continue
		}
		set, err := p.permissionSet(ctx, inc.NSID)
		if err != nil {
			return nil, err
		}
		sets[inc.NSID] = set
	}
	return sets, nil
}

func (p *Provider) permissionSet(ctx context.Context, nsid string) (*lexicon.SchemaPermissionSet, error) {
	f, err := p.lexicons.get(ctx, p, nsid)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, oerr(400, "invalid_scope", "Could not resolve Lexicon for NSID (%s)", nsid)
	}
	set, err := permissionSetOf(f)
	if err != nil {
		return nil, oerr(400, "invalid_scope", "Lexicon document is not a permission set (%s)", nsid)
	}
	return set, nil
}

// lexiconRefresh is how long a resolution is used before the NSID is
// resolved again (the reference's LEXICON_REFRESH_FREQUENCY).
const lexiconRefresh = 5 * time.Minute

// maxUnresolved bounds the remembered failures: any client can push
// requests naming NSIDs nobody has.
const maxUnresolved = 1024

// lexicons remembers each NSID's last resolution, as the reference's
// lexicon store does: a set that stops resolving keeps its last document,
// so the sessions granted it go on refreshing with it. The reference keeps
// them in its database; these live as long as the provider.
type lexicons struct {
	mu         sync.Mutex
	m          map[string]lexiconEntry
	unresolved int
}

type lexiconEntry struct {
	file    *lexicon.SchemaFile // nil: never resolved
	updated time.Time
}

func (l *lexicons) get(ctx context.Context, p *Provider, nsid string) (*lexicon.SchemaFile, error) {
	now := p.now()
	l.mu.Lock()
	e, known := l.m[nsid]
	l.mu.Unlock()
	if known && now.Sub(e.updated) < lexiconRefresh {
		return e.file, nil
	}
	err := ErrNoLexicon
	var f *lexicon.SchemaFile
	if p.opts.PermissionSet != nil {
		f, err = p.opts.PermissionSet(ctx, nsid)
	}
	switch {
	case err == nil:
		e.file = f
	case errors.Is(err, ErrNoLexicon):
		// Keep the last document, if any.
	default:
		return nil, err
	}
	e.updated = now
	l.put(nsid, e, now)
	return e.file, nil
}

func (l *lexicons) put(nsid string, e lexiconEntry, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]lexiconEntry{}
	}
	old, known := l.m[nsid]
	if known && old.file == nil {
		l.unresolved--
	}
	if e.file == nil {
		if l.unresolved >= maxUnresolved {
			for k, v := range l.m {
				if v.file == nil && now.Sub(v.updated) >= lexiconRefresh {
					delete(l.m, k)
					l.unresolved--
				}
			}
		}
		if l.unresolved >= maxUnresolved {
			delete(l.m, nsid)
			return
		}
		l.unresolved++
	}
	l.m[nsid] = e
}

func includeScope(s string) (*auth.Permission, bool) {
	if !strings.HasPrefix(s, "include:") {
		return nil, false
	}
	perm, err := auth.ParsePermissionString(s)
	if err != nil || perm.Resource != "include" {
		return nil, false
	}
	return perm, true
}

// tokenScope is the scope a token of the request's scope grants: each
// include: replaced by the permissions of its set, then the other scopes,
// in the reference's order (LexiconManager.buildTokenScope).
func (p *Provider) tokenScope(ctx context.Context, scope string) (string, error) {
	sets, err := p.permissionSets(ctx, scope)
	if err != nil || len(sets) == 0 {
		return scope, err
	}
	var included, other []string
	for _, s := range strings.Split(scope, " ") {
		inc, ok := includeScope(s)
		if !ok {
			other = append(other, s)
			continue
		}
		included = append(included, expand(inc, sets[inc.NSID])...)
	}
	return strings.Join(append(included, other...), " "), nil
}

// expand is the reference's IncludeScope.toScopes: the set's repo: and
// rpc: permissions whose collections and methods all sit under the set's
// own NSID group (com.example.auth.basics may grant com.example.auth.*);
// an rpc: permission with inheritAud takes the include's aud, and one
// naming its own audience is dropped.
func expand(inc *auth.Permission, set *lexicon.SchemaPermissionSet) []string {
	group := inc.NSID[:strings.LastIndex(inc.NSID, ".")+1]
	under := func(nsids []string) bool {
		return len(nsids) > 0 && !slices.ContainsFunc(nsids, func(n string) bool {
			return n == "*" || !strings.HasPrefix(n, group) || len(n) <= len(group)
		})
	}
	var out []string
	for _, lp := range set.Permissions {
		switch lp.Resource {
		case "repo":
			if under(lp.Collection) {
				out = append(out, repoScope(lp.Collection, lp.Action))
			}
		case "rpc":
			aud := lp.Audience
			if lp.InheritAud && aud == "" {
				aud = inc.Audience
			}
			if (lp.Audience != "" && lp.Audience != "*") || aud == "" || !under(lp.LXM) {
				continue
			}
			out = append(out, rpcScope(lp.LXM, aud))
		}
	}
	return out
}

var repoActions = []string{"create", "update", "delete"}

// repoScope and rpcScope format permissions as the reference's scope
// parser does: values sorted and deduplicated, one value positional, the
// default (every action) left out, parameters in its schema's order.
func repoScope(collections, actions []string) string {
	collections = sortedSet(collections)
	var acts []string
	for _, a := range repoActions {
		if len(actions) == 0 || slices.Contains(actions, a) {
			acts = append(acts, a)
		}
	}
	var q []string
	if len(collections) > 1 {
		for _, c := range collections {
			q = append(q, "collection="+formEscape(c))
		}
	}
	if len(acts) != len(repoActions) {
		for _, a := range acts {
			q = append(q, "action="+a)
		}
	}
	return scopeString("repo", collections, q)
}

func rpcScope(lxms []string, aud string) string {
	lxms = sortedSet(lxms)
	var q []string
	if len(lxms) > 1 {
		for _, l := range lxms {
			q = append(q, "lxm="+formEscape(l))
		}
	}
	q = append(q, "aud="+formEscape(aud))
	return scopeString("rpc", lxms, q)
}

func scopeString(resource string, positional, query []string) string {
	s := resource
	if len(positional) == 1 {
		s += ":" + positional[0]
	}
	if len(query) > 0 {
		s += "?" + strings.Join(query, "&")
	}
	return s
}

// formEscape is the WHATWG urlencoded serializer's escaping, which the
// reference's URLSearchParams uses: url.QueryEscape differs on '*' and '~'.
func formEscape(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '*', c == '-', c == '.', c == '_':
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func sortedSet(v []string) []string {
	v = slices.Clone(v)
	slices.Sort(v)
	return slices.Compact(v)
}
