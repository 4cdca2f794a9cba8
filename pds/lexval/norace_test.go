//go:build !race

package lexval

const raceEnabled = false
