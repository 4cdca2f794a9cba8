//go:build race

package reliability

// raceEnabled: the tests run under the race detector, and the crash test's
// binary is built with it too.
const raceEnabled = true
