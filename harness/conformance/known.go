package conformance

import "strings"

// Difference is a known way a backend's transcript differs from the
// reference's golden one. docs/known-differences.md lists the same
// entries, by ID, in its "Found by the conformance suite" table (a test
// checks that the two agree).
type Difference struct {
	// ID names the difference in the docs table.
	ID string
	// Scenarios are the scenarios that bound it: the difference may
	// only show there, at the places At lists.
	Scenarios []string
	// At lists where, each "step" (the whole step) or "step > path" (a
	// path within the step and everything under it); step "*" is any
	// step.
	At []string
	// Backends are the backends that differ this way.
	Backends []string
	// Verdict: "deliberate" (fakepds differs on purpose), "bug" (a
	// fakepds bug not fixed yet), or "reference" (the backend runs
	// another version of the reference).
	Verdict string
	// Reference is the reference version the difference was checked
	// against.
	Reference string
	// Summary says what differs, in a line.
	Summary string
}

// Covers reports whether d explains diff, seen running scenario on
// backend.
func (d Difference) Covers(backend, scenario string, diff Diff) bool {
	if !contains(d.Scenarios, scenario) || !contains(d.Backends, backend) {
		return false
	}
	for _, at := range d.At {
		step, path, _ := strings.Cut(at, " > ")
		if step != "*" && step != diff.Step {
			continue
		}
		if path == "" || diff.Path == path || strings.HasPrefix(diff.Path, path+".") || strings.HasPrefix(diff.Path, path+"[") {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// ReferenceVersion is the npm @atproto/pds the goldens were recorded from
// (scripts/reference-pds/package.json pins it).
const ReferenceVersion = "0.5.35"

// Known is every difference the suite accepts. Anything else fails it,
// and so does an entry no run shows any more (fixed: remove it here and
// in docs/known-differences.md).
var Known = []Difference{
	// ------------------------------------------------------ deliberate
	{
		ID:        "plc-did-document-format",
		Scenarios: []string{"account-create", "repo-list-describe", "firehose-account-creation", "identity", "handle-reserved", "handle-case"},
		At:        []string{"* > body.didDoc.@context", "* > body.didDoc.verificationMethod"},
		Backends:  []string{"inprocess"},
		Verdict:   "deliberate", Reference: ReferenceVersion,
		Summary: "DID documents come from the PLC directory in use: fakepds's is shaped as production plc.directory serves them (Multikey, absolute key id, three @context entries); dev-env's TestPlc serves the older EcdsaSecp256k1VerificationKey2019 shape with a relative id \"#atproto\"",
	},
	{
		ID:        "unknown-method",
		Scenarios: []string{"xrpc"},
		At:        []string{"unknown method", "unknown method with auth"},
		Backends:  []string{"inprocess"},
		Verdict:   "deliberate", Reference: ReferenceVersion,
		Summary: "a method fakepds does not serve answers 501 MethodNotImplemented; the reference proxies it to its appview: 401 AuthMissing without auth, 502 UpstreamFailure with it",
	},
	{
		ID:        "subscription-without-upgrade",
		Scenarios: []string{"firehose-replay"},
		At:        []string{"cursor not a number", "subscribeRepos without upgrade"},
		Backends:  []string{"inprocess"},
		Verdict:   "deliberate", Reference: ReferenceVersion,
		Summary: "a plain GET of subscribeRepos (no WebSocket upgrade) answers 400 text/plain \"Bad Request\"; the reference's catch-all appview proxy answers it 401 AuthMissing",
	},
	{
		ID:        "json-parse-message",
		Scenarios: []string{"account-create"},
		At:        []string{"malformed JSON > body.message"},
		Backends:  []string{"inprocess"},
		Verdict:   "deliberate", Reference: ReferenceVersion,
		Summary: "a malformed JSON body is 400 SyntaxError on both, but the message is Go's parse error, not V8's JSON.parse message",
	},
	{
		ID:        "root-and-robots",
		Scenarios: []string{"xrpc"},
		At:        []string{"root > body.$text", "robots.txt > body.$text"},
		Backends:  []string{"inprocess"},
		Verdict:   "deliberate", Reference: ReferenceVersion,
		Summary: "GET / says it is fakepds (the reference: an ASCII-art banner); /robots.txt disallows crawling (the reference allows it)",
	},
	{
		ID:        "no-did-cache",
		Scenarios: []string{"identity"},
		At:        []string{"describeRepo after updateHandle > body.handleIsCorrect", "describeRepo after updateHandle > body.didDoc.alsoKnownAs"},
		Backends:  []string{"inprocess"},
		Verdict:   "deliberate", Reference: ReferenceVersion,
		Summary: "describeRepo right after updateHandle shows the new DID document and handleIsCorrect true; the reference serves its cached DID document (old handle, handleIsCorrect false) until the cache goes stale",
	},

	{
		ID:        "getrecord-not-local",
		Scenarios: []string{"handle-case"},
		At:        []string{"getRecord mixed"},
		Backends:  []string{"inprocess"},
		Verdict:   "deliberate", Reference: ReferenceVersion,
		Summary: "getRecord of a repo this PDS does not hold (here a handle in another case) answers 400 InvalidRequest \"Could not find repo\", as listRecords does; the reference proxies it to its appview (in dev-env, unreachable: 502 UpstreamFailure)",
	},
	{
		ID:        "import-foreign-commit-did",
		Scenarios: []string{"repo-import"},
		At:        []string{"alice's next commit > checks.did"},
		Backends:  []string{"inprocess"},
		Verdict:   "deliberate", Reference: ReferenceVersion,
		Summary: "after importRepo of another account's repo (200 on both), the next commit names the importing account's DID; the reference's names the other account's (taken from the imported head) and signs it with the importing account's key, a commit no consumer can verify",
	},

	// ------------------------------------------------------------- bugs
	// (none known: each one found was fixed in pds/; a new one goes here,
	// with Verdict "bug", until it is)
}
