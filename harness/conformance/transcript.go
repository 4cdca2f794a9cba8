package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Transcript is what one scenario did on one backend.
type Transcript struct {
	Scenario string `json:"scenario"`
	// Reference is the version of the reference PDS a golden was
	// recorded from; empty in a run's transcript.
	Reference string `json:"reference,omitempty"`
	Steps     []Step `json:"steps"`
}

// Step is one call, or one firehose capture.
type Step struct {
	Name string `json:"step"`
	// Call is "GET nsid" or "POST nsid" (or a plain path for what is not
	// XRPC); "firehose" for a capture.
	Call   string `json:"call"`
	Status int    `json:"status,omitempty"`
	// Type is the response's Content-Type.
	Type  string `json:"type,omitempty"`
	Error string `json:"error,omitempty"`
	// Body is the normalized JSON body, or a summary of a binary one
	// ({"$car": ...}, {"$bytes": ...}).
	Body any `json:"body,omitempty"`
	// Events are the firehose frames captured, normalized.
	Events []any `json:"events,omitempty"`
	// Checks are facts the scenario computed (a blob read back equals
	// the one uploaded, seqs increase), with their values.
	Checks map[string]any `json:"checks,omitempty"`
}

// Marshal is the golden file's text: indented, keys sorted, a final
// newline.
func (t *Transcript) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // placeholders read "<cid:1>", not "\u003ccid:1\u003e"
	enc.SetIndent("", "  ")
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Normalizer turns the values of one run into placeholders. Values it was
// told about (Name) become named placeholders ("<did:alice>"); other
// identifiers are numbered in order of first appearance, per kind
// ("<cid:3>"), so that a transcript still says which values are equal.
type Normalizer struct {
	named  []namedValue
	seen   map[string]string
	counts map[string]int
}

type namedValue struct{ value, placeholder string }

// NewNormalizer returns an empty Normalizer.
func NewNormalizer() *Normalizer {
	return &Normalizer{seen: map[string]string{}, counts: map[string]int{}}
}

// Name makes value appear as placeholder wherever it occurs in a string.
// Longer values are replaced first.
func (n *Normalizer) Name(value, placeholder string) {
	if value == "" {
		return
	}
	n.named = append(n.named, namedValue{value, placeholder})
	sort.SliceStable(n.named, func(i, j int) bool { return len(n.named[i].value) > len(n.named[j].value) })
}

// Placeholder is the numbered placeholder of value, of kind.
func (n *Normalizer) Placeholder(kind, value string) string {
	if p, ok := n.seen[value]; ok {
		return p
	}
	n.counts[kind]++
	p := "<" + kind + ":" + strconv.Itoa(n.counts[kind]) + ">"
	n.seen[value] = p
	return p
}

var (
	reDIDPLC = regexp.MustCompile(`did:plc:[a-z2-7]{24}`)
	reDIDKey = regexp.MustCompile(`did:key:z[1-9A-HJ-NP-Za-km-z]{40,}`)
	reCID    = regexp.MustCompile(`\bbaf[a-z2-7]{50,}`)
	// A TID as a whole string or a path segment. Its first character is a
	// digit for any time before the year 2180, which keeps 13-letter words
	// ("authenticated") out.
	reTID      = regexp.MustCompile(`(^|/)([2-7][2-7a-z]{12})($|[/?#])`)
	reDatetime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$`)
	reJWT      = regexp.MustCompile(`^eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$`)
	rePort     = regexp.MustCompile(`^(https?|wss?)://(localhost|127\.0\.0\.1):\d+`)
)

// Keys whose string values are free text or random (messages, signatures,
// generated passwords, invite codes): only their presence and type count.
var textKeys = map[string]bool{
	"sig": true, "password": true, "code": true, "codes": true,
	"jti": true, "token": true, "publicKeyMultibase": true, "version": true,
	"recoveryKey": true,
}

// Keys whose number values change from run to run.
var numberKeys = map[string]bool{"seq": true, "iat": true, "exp": true, "nbf": true}

// Value normalizes a decoded JSON (or CBOR) value found under key.
func (n *Normalizer) Value(key string, v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range slices.Sorted(mapKeys(v)) {
			out[k] = n.Value(k, v[k])
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = n.Value(key, e)
		}
		return out
	case string:
		return n.String(key, v)
	case json.Number, float64, int64, int, uint64:
		if numberKeys[key] {
			return "<number>"
		}
		return v
	default: // bool, nil
		return v
	}
}

// String normalizes a string found under key.
func (n *Normalizer) String(key, s string) any {
	if textKeys[key] {
		return "<string>"
	}
	if reJWT.MatchString(s) {
		return n.jwt(s)
	}
	if reDatetime.MatchString(s) {
		return "<datetime>"
	}
	for _, nv := range n.named {
		s = strings.ReplaceAll(s, nv.value, nv.placeholder)
	}
	s = rePort.ReplaceAllString(s, "$1://$2:<port>")
	s = reDIDPLC.ReplaceAllStringFunc(s, func(m string) string { return n.Placeholder("did", m) })
	s = reDIDKey.ReplaceAllStringFunc(s, func(m string) string { return n.Placeholder("didkey", m) })
	s = reCID.ReplaceAllStringFunc(s, func(m string) string { return n.Placeholder("cid", m) })
	// Twice: adjacent TIDs share the "/" between them.
	for range 2 {
		s = reTID.ReplaceAllStringFunc(s, func(m string) string {
			sm := reTID.FindStringSubmatch(m)
			return sm[1] + n.Placeholder("tid", sm[2]) + sm[3]
		})
	}
	return s
}

// jwt is a token's decoded header and payload, normalized.
func (n *Normalizer) jwt(s string) any {
	parts := strings.Split(s, ".")
	out := map[string]any{}
	for i, name := range []string{"header", "payload"} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return "<jwt: undecodable>"
		}
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return "<jwt: undecodable>"
		}
		out[name] = n.Value("", m)
	}
	return map[string]any{"$jwt": out}
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Diff is one difference between a golden transcript and a run's.
type Diff struct {
	Step   string // the step's name
	Path   string // within the step: "status", "body.commit.cid", "events[2].ops"
	Golden string // the golden's value, JSON; "(absent)" when it has none
	Got    string
}

func (d Diff) String() string {
	return fmt.Sprintf("step %q %s: reference %s, got %s", d.Step, d.Path, d.Golden, d.Got)
}

const absent = "(absent)"

// Compare lists the differences between a golden transcript and got,
// path by path. Steps are matched by name, in order.
func Compare(golden, got *Transcript) []Diff {
	var diffs []Diff
	gs := map[string]map[string]string{}
	for _, s := range golden.Steps {
		gs[s.Name] = flattenStep(s)
	}
	seen := map[string]bool{}
	for _, s := range got.Steps {
		seen[s.Name] = true
		want, ok := gs[s.Name]
		if !ok {
			diffs = append(diffs, Diff{Step: s.Name, Path: "", Golden: absent, Got: "(step)"})
			continue
		}
		diffs = append(diffs, diffMaps(s.Name, want, flattenStep(s))...)
	}
	for _, s := range golden.Steps {
		if !seen[s.Name] {
			diffs = append(diffs, Diff{Step: s.Name, Path: "", Golden: "(step)", Got: absent})
		}
	}
	return diffs
}

func diffMaps(step string, want, got map[string]string) []Diff {
	var out []Diff
	for _, p := range slices.Sorted(mapKeysS(want)) {
		g, ok := got[p]
		if !ok {
			g = absent
		}
		if g != want[p] {
			out = append(out, Diff{Step: step, Path: p, Golden: want[p], Got: g})
		}
	}
	for _, p := range slices.Sorted(mapKeysS(got)) {
		if _, ok := want[p]; !ok {
			out = append(out, Diff{Step: step, Path: p, Golden: absent, Got: got[p]})
		}
	}
	return out
}

func mapKeysS(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// flattenStep maps every leaf of a step to its JSON value. A step is
// round-tripped through JSON first, so a golden read from disk and a
// transcript made in memory flatten alike.
func flattenStep(s Step) map[string]string {
	s.Name = ""
	b, err := json.Marshal(s)
	if err != nil {
		return map[string]string{"": fmt.Sprintf("(unmarshalable: %v)", err)}
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return map[string]string{"": fmt.Sprintf("(undecodable: %v)", err)}
	}
	out := map[string]string{}
	flatten("", v, out)
	return out
}

func flatten(path string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			out[path] = "{}"
		}
		for k, e := range v {
			p := k
			if path != "" {
				p = path + "." + k
			}
			flatten(p, e, out)
		}
	case []any:
		if len(v) == 0 {
			out[path] = "[]"
		}
		for i, e := range v {
			flatten(path+"["+strconv.Itoa(i)+"]", e, out)
		}
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		out[path] = strings.TrimSuffix(buf.String(), "\n")
	}
}
