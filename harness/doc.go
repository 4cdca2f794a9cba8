// Package harness runs fakepds for Go tests, as httptest runs an HTTP
// server: [Main] starts one PDS per test binary and [Shared] returns it,
// [New] starts a private one that closes with its test, [Start] one for use
// outside a test. The helpers read like the work: [PDS.NewAccount] gives an
// [Account] with a logged-in indigo client and seed helpers
// ([Account.Post], [Account.Follow], ...); [PDS.Firehose] waits for events
// with a bound, never a sleep; the powers ([PDS.Clock], [PDS.Fail],
// [PDS.Emails]) do what a real PDS cannot. A PDS is reached at the host it
// was asked to listen on, http://localhost:PORT by default.
//
// docs/harness.md in the fakepds module is the guide, from a fresh module
// to a passing test, with a cookbook; the Example functions here run.
//
// The harness is where the HARNESS_PDS_* environment variables (package
// env) become a pds.Config. The docker and reference backends live in
// harness/backend/docker and harness/backend/reference: import one to make
// HARNESS_PDS_BACKEND select it.
package harness
