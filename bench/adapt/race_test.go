//go:build race

package main

// raceEnabled: the race detector is on (it makes the peers' rows of
// TestSituations, millions of requests, too slow to run).
const raceEnabled = true
