package main

import "flag"

// The worst of many runs. A virtual-time run is deterministic but for the
// order the runtime schedules its goroutines in, which differs from run to
// run: a figure that holds in nine runs of ten does not hold. With -runs N
// every scenario of the virtual-time tables (TestSituations,
// TestBelowQuotaJobsAndPoissonLoad) runs N times, its seeded randomness
// (Poisson arrivals) seeded afresh each time; pacer is held to its targets
// in every run, and the tables show each figure's median and, in brackets,
// its worst (medianWorst and spread, in report.go, which the adapt command's
// own -runs shares).
//
//	cd bench && go test ./adapt -run 'TestSituations|TestBelowQuota' -args -runs 20
var runsFlag = flag.Int("runs", 1, "runs of each virtual-time scenario; the tables show the median and (the worst)")

// runs is -runs, at least 1.
func runs() int { return max(1, *runsFlag) }
