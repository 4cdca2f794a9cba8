// Package reliability holds fakepds's reliability tests and nothing else
// (this file is its only non-test code): the fakepds binary killed with
// SIGKILL mid-write and restarted on its data dir, and the concurrency
// guarantees of writes and account creation. docs/reliability.md states
// what they promise and the figures they measured.
//
// Every test runs scaled down (a few seconds) in `make test`; FAKEPDS_SOAK=1
// (`make soak`) runs them full size, minutes each, and logs the figures.
// The process-level tests build the binary once per test run, with the race
// detector when the tests have it, and skip under -short.
package reliability
