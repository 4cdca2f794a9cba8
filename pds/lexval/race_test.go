//go:build race

package lexval

// raceEnabled: the race detector makes the regexps the exhaustive tests
// compare with ~50x slower, so they search a shorter length under it.
const raceEnabled = true
