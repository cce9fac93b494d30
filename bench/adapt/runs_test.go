package main

import (
	"flag"
	"fmt"
	"math"
	"slices"
)

// The worst of many runs. A virtual-time run is deterministic but for the
// order the runtime schedules its goroutines in, which differs from run to
// run: a figure that holds in nine runs of ten does not hold. With -runs N
// every scenario of the virtual-time tables (TestSituations,
// TestBelowQuotaJobsAndPoissonLoad) runs N times, its seeded randomness
// (Poisson arrivals) seeded afresh each time; pacer is held to its targets
// in every run, and the tables show each figure's median and, in brackets,
// its worst.
//
//	cd bench && go test ./adapt -run 'TestSituations|TestBelowQuota' -args -runs 20
var runsFlag = flag.Int("runs", 1, "runs of each virtual-time scenario; the tables show the median and (the worst)")

// runs is -runs, at least 1.
func runs() int { return max(1, *runsFlag) }

// worse says which way a figure goes bad: lower (goodput, fairness) or
// higher (refusals, errors, time).
type worse bool

const (
	lowerWorse  worse = false
	higherWorse worse = true
)

// medianWorst returns the median of xs and its worst value.
func medianWorst(xs []float64, w worse) (median, worst float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	worst = s[0]
	if w == higherWorse {
		worst = s[n-1]
	}
	return median, worst
}

// spread formats xs as its median, and, over several runs whose worst
// differs, the worst in brackets: "0.95 (0.91)".
func spread(format string, xs []float64, w worse) string {
	median, worst := medianWorst(xs, w)
	s := fmt.Sprintf(format, median)
	if len(xs) > 1 && fmt.Sprintf(format, worst) != s {
		s += " (" + fmt.Sprintf(format, worst) + ")"
	}
	return s
}

// each maps runs to one figure of each.
func each[T any](rs []T, f func(T) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}
