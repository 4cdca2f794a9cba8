// Package reliability holds fakepds's reliability tests and nothing else
// (this file is its only non-test code): the fakepds binary killed with
// SIGKILL mid-write and restarted on its data dir, the binary under a
// mixed load of 32 clients and three firehose consumers (one cut off for
// reading too slowly), and the concurrency guarantees of writes and
// account creation. docs/reliability.md states
// what they promise and the figures they measured.
//
// Every test runs scaled down (a few seconds) in `make test`; FAKEPDS_SOAK=1
// (`make soak`) runs them full size, minutes each, and logs the figures.
// The process-level tests build the binary once per test run, with the race
// detector when the tests have it, and skip under -short.
package reliability
