// Package harness runs fakepds for Go tests: one PDS per test binary
// (Main, Shared), private ones per test (New), and the helpers tests use.
//
// The harness is where the HARNESS_PDS_* environment variables (package
// env) become a pds.Config.
package harness
