//go:build !race

package pacer

const raceEnabled = false
