// Command compare runs the bench workloads on pacer, golang.org/x/time/rate
// and go.uber.org/ratelimit and prints a markdown table: ns/op (median of
// -count runs), allocs/op, and the ratio of each library to x/time/rate.
//
//	go run ./cmd/compare -count 10 -benchtime 500ms
//
// The runs are interleaved (every workload once, then again, -count times)
// so that a noisy machine slows all libraries alike instead of whichever
// happened to run during the noise.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pacer-go/pacer/bench"
)

func main() {
	count := flag.Int("count", 10, "runs of each workload; the table shows the median")
	benchtime := flag.Duration("benchtime", 300*time.Millisecond, "duration of each run")
	filter := flag.String("run", "", "only workloads whose Scenario/Lib name contains this")
	testing.Init()
	flag.Parse()
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	var ws []bench.Workload
	for _, w := range bench.Workloads() {
		if strings.Contains(w.Name(), *filter) {
			ws = append(ws, w)
		}
	}
	runs := make([][]testing.BenchmarkResult, len(ws))
	for i := range *count {
		fmt.Fprintf(os.Stderr, "run %d/%d\n", i+1, *count)
		for j, w := range ws {
			runs[j] = append(runs[j], testing.Benchmark(w.Fn))
		}
	}
	report(os.Stdout, ws, runs, *count, *benchtime)
}

type row struct {
	w      bench.Workload
	ns     float64 // median ns/op; 0 if the workload failed
	lo, hi float64 // fastest and slowest run
	allocs int64
}

func summarize(w bench.Workload, rs []testing.BenchmarkResult) row {
	r := row{w: w}
	var ns []float64
	for _, res := range rs {
		if res.N == 0 {
			return r // failed (b.Fatal)
		}
		ns = append(ns, float64(res.T.Nanoseconds())/float64(res.N))
		r.allocs = max(r.allocs, res.AllocsPerOp())
	}
	slices.Sort(ns)
	r.ns, r.lo, r.hi = ns[len(ns)/2], ns[0], ns[len(ns)-1]
	if len(ns)%2 == 0 {
		r.ns = (ns[len(ns)/2-1] + ns[len(ns)/2]) / 2
	}
	return r
}

func report(out io.Writer, ws []bench.Workload, runs [][]testing.BenchmarkResult, count int, benchtime time.Duration) {
	rows := make([]row, len(ws))
	byName := map[string]row{}
	for i, w := range ws {
		rows[i] = summarize(w, runs[i])
		byName[w.Name()] = rows[i]
	}
	fmt.Fprintf(out, "%s/%s, GOMAXPROCS=%d, %s; median of %d runs of %v each.\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.Version(), count, benchtime)
	fmt.Fprintln(out, "| scenario | library | ns/op | range | allocs/op | vs x-time-rate |")
	fmt.Fprintln(out, "| --- | --- | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		lib := r.w.Lib
		if r.w.Note != "" {
			lib += " (" + r.w.Note + ")"
		}
		if r.ns == 0 {
			fmt.Fprintf(out, "| %s | %s | failed | | | |\n", r.w.Scenario, lib)
			continue
		}
		ratio := ""
		if x, ok := byName[r.w.Scenario+"/"+bench.XRate]; ok && x.ns > 0 {
			ratio = fmt.Sprintf("%.2f×", r.ns/x.ns)
			if r.w.Lib == bench.Pacer {
				ratio = "**" + ratio + "**"
			}
		}
		fmt.Fprintf(out, "| %s | %s | %.1f | %.0f–%.0f | %d | %s |\n",
			r.w.Scenario, lib, r.ns, r.lo, r.hi, r.allocs, ratio)
	}

	fmt.Fprintln(out)
	target := func(scenario string, goal float64) {
		p, x := byName[scenario+"/"+bench.Pacer], byName[scenario+"/"+bench.XRate]
		if p.ns == 0 || x.ns == 0 {
			return
		}
		ratio := p.ns / x.ns
		verdict := "met"
		if ratio > goal {
			verdict = "NOT met"
		}
		fmt.Fprintf(out, "- %s: pacer / x-time-rate = %.2f× (target ≤ %.2f×): %s; pacer %d allocs/op.\n",
			scenario, ratio, goal, verdict, p.allocs)
	}
	target("Allow", 0.7)
	target("AllowParallel", 0.5)
	if p, c := byName["Allow/"+bench.Pacer], byName["Clock/time.Since"]; p.ns > 0 && c.ns > 0 {
		fmt.Fprintf(out, "- Fast path vs the clock: pacer Allow %.1f ns, a bare monotonic read (time.Since) %.1f ns: "+
			"the bucket's own work is %.1f ns, the clock read is %.0f%% of the call.\n",
			p.ns, c.ns, p.ns-c.ns, 100*c.ns/p.ns)
	}
	if c := byName["Clock/time.Now"]; c.ns > 0 {
		fmt.Fprintf(out, "- time.Now() for reference: %.1f ns.\n", c.ns)
	}
}
