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
		Scenarios: []string{"account-create", "repo-list-describe", "firehose-account-creation", "identity"},
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

	// ------------------------------------------------------------- bugs
	{
		ID:        "handle-syntax-error",
		Scenarios: []string{"account-create", "identity"},
		At:        []string{"handle invalid", "updateHandle invalid"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "a handle that is not handle syntax (\"not a handle\") is 400 InvalidHandle \"Disallowed characters in handle ...\"; the reference's lexicon check answers first: 400 InvalidRequest \"Invalid handle (got \\\"not a handle\\\") at $.handle\"",
	},
	{
		ID:        "params-limit-messages",
		Scenarios: []string{"repo-list-describe", "sync"},
		At:        []string{"listRecords limit 0 > body.message", "listRecords limit 101 > body.message", "listRecords limit not a number > body.message", "listRepos limit 0 > body.message"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "an out-of-range limit says \"limit must be an integer between 1 and N\"; the reference: \"integer too small (minimum 1, got 0)\", \"integer too big (maximum 100, got 101)\", \"Expected integer value type (got \\\"many\\\")\"",
	},
	{
		ID:        "at-identifier-params",
		Scenarios: []string{"repo-list-describe", "repo-create-get"},
		At:        []string{"describeRepo invalid", "getRecord invalid repo > body.message"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "repo=\"not a repo\" (not an AT identifier) is looked up: describeRepo 400 RepoNotFound, getRecord \"Could not find repo: ...\"; the reference rejects the params first: 400 InvalidRequest \"Invalid com.atproto.repo.X params: Invalid AT identifier (got ...)\"",
	},
	{
		ID:        "describe-repo-not-found-message",
		Scenarios: []string{"repo-list-describe", "admin-accounts"},
		At:        []string{"describeRepo unknown > body.message", "describeRepo unknown handle > body.message", "describeRepo deleted > body.message"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "describeRepo of an unknown repo says \"Could not find user: X\"; the reference 0.5.35 says \"Could not find repo for DID: X\" (same 400 RepoNotFound)",
	},
	{
		ID:        "describe-repo-status",
		Scenarios: []string{"account-lifecycle", "admin-takedown"},
		At:        []string{"describeRepo deactivated", "describeRepo taken down"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "describeRepo of a deactivated or taken-down repo answers 200; the reference: 400 RepoDeactivated \"Repo has been deactivated: DID\", 400 RepoTakendown \"Repo has been takendown: DID\"",
	},
	{
		ID:        "put-swaprecord-null",
		Scenarios: []string{"repo-put-delete"},
		At:        []string{"putRecord swapRecord null on existing", "getRecord after swapRecord null"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "putRecord with \"swapRecord\": null over an existing record replaces it; the reference refuses: 400 InvalidSwap \"Record was at CID\"",
	},
	{
		ID:        "delete-missing-with-swaprecord",
		Scenarios: []string{"repo-put-delete"},
		At:        []string{"deleteRecord never existed swapRecord"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "deleteRecord of a record that does not exist, with a swapRecord, is 400 InvalidSwap \"Record was at null\"; the reference answers 200 {} (no commit, the swap is not checked)",
	},
	{
		ID:        "applywrites-empty-commit",
		Scenarios: []string{"repo-apply-writes", "firehose-empty-commit"},
		At:        []string{"applyWrites empty", "events"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "applyWrites with no writes answers {\"results\": []} and commits nothing; the reference makes an empty commit: {\"commit\": {cid, rev}, \"results\": []} and a #commit event with no ops",
	},
	{
		ID:        "applywrites-delete-missing",
		Scenarios: []string{"repo-apply-writes"},
		At:        []string{"applyWrites delete missing"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "applyWrites deleting a record that does not exist answers 200 with a deleteResult; the reference answers 500 InternalServerError (odd, but the project matches odd answers)",
	},
	{
		ID:        "applywrites-union-message",
		Scenarios: []string{"repo-apply-writes"},
		At:        []string{"applyWrites unknown write type > body.message"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "an unknown write $type says \"Action not supported: T\"; the reference's lexicon check: \"Expected one of \\\"...#create\\\", \\\"...#update\\\" or \\\"...#delete\\\" (got \\\"T\\\") at $.writes[0].$type\"",
	},
	{
		ID:        "preferences-type-message",
		Scenarios: []string{"preferences"},
		At:        []string{"putPreferences no type > body.message"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "a preference without $type says \"Preference is missing a $type\"; the reference's lexicon check: \"Expected an object which includes the \\\"$type\\\" property value type (got {\\\"enabled\\\": ...}) at $.preferences[0]\"",
	},
	{
		ID:        "applywrites-same-path-frame",
		Scenarios: []string{"firehose-commits"},
		At:        []string{"events > events[4].blocks", "events > events[4].ops[2].prev"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "an applyWrites that updates then deletes the same record: the #commit's delete op has prev = the intermediate update's CID and its blocks carry that record (4 blocks); the reference gives every op the prev of the previous commit and only the blocks of the final tree (3)",
	},
	{
		ID:        "express-404-page",
		Scenarios: []string{"xrpc"},
		At:        []string{"not XRPC"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "a path that is not XRPC answers Go's 404 text/plain \"404 page not found\"; the reference answers Express's text/html page \"Cannot GET /path\" (fakepds's PLC already does)",
	},
	{
		ID:        "well-known-not-found",
		Scenarios: []string{"identity"},
		At:        []string{"well-known atproto-did unknown"},
		Backends:  []string{"inprocess"},
		Verdict:   "bug", Reference: ReferenceVersion,
		Summary: "/.well-known/atproto-did for an unknown handle: 404 text/plain \"User not found\\n\"; the reference: 404 text/html \"User not found\" (no newline)",
	},
}
