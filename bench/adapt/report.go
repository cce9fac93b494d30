package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

// report renders the results: the table, the acceptance verdicts, RESULTS.md.
type report struct {
	options
	results    map[runKey][]outcome // every run of each cell, in run order
	elapsed    time.Duration
	loadBefore string // loadAverage() when the runs began
}

// headerStyles are the styles whose responses state the quota; pacer must
// not be throttled on them once it has a response.
func headerStyles(styles []apisim.Style) []apisim.Style {
	var out []apisim.Style
	for _, s := range styles {
		if s != apisim.StyleRetryAfter && s != apisim.StyleBare {
			out = append(out, s)
		}
	}
	return out
}

// reactive are the peers that react to 429s rather than pace at a fixed rate.
var reactive = []clientKind{clientPlain, clientRetryable, clientCubic}

// Acceptance thresholds (issue 7).
const (
	minHeaderGoodput     = 0.9 * 0.9 // ≥ 0.9 × safety factor 0.9 × quota
	minRetryAfterGoodput = 0.8
)

func (r report) writeTable(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| style | client | goodput / quota | server 429s | 429s after 1st response | caller errors | cut off at end | calls | added p50 | added p99 |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	count := func(f func(outcome) int) func(outcome) float64 {
		return func(o outcome) float64 { return float64(f(o)) }
	}
	dur := func(f func(outcome) time.Duration) func(outcome) float64 {
		return func(o outcome) float64 { return float64(f(o)) }
	}
	asDur := func(x float64) string { return fmtDur(time.Duration(math.Round(x))) }
	for _, style := range r.Styles {
		for _, kind := range r.Clients {
			rs := r.results[runKey{style, kind}]
			if len(rs) == 0 {
				continue
			}
			name := string(kind)
			if kind == clientPacer {
				name = "**pacer**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", style, name,
				spread("%.2f", each(rs, outcome.Goodput), lowerWorse),
				spread("%.0f", each(rs, count(func(o outcome) int { return o.Throttled })), higherWorse),
				spread("%.0f", each(rs, count(func(o outcome) int { return o.ThrottledAfterFirst })), higherWorse),
				spread("%.0f", each(rs, count(func(o outcome) int { return o.Failed })), higherWorse),
				spread("%.0f", each(rs, count(func(o outcome) int { return o.CutOff })), higherWorse),
				spread("%.0f", each(rs, count(func(o outcome) int { return o.Calls })), lowerWorse),
				spreadFunc(asDur, each(rs, dur(func(o outcome) time.Duration { return o.AddedP50 })), higherWorse),
				spreadFunc(asDur, each(rs, dur(func(o outcome) time.Duration { return o.AddedP99 })), higherWorse))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plotted is the run of each cell the plot shows: its only run, or pacer's
// median run by goodput (runs ordered from the worst: lowest goodput, then
// most 429s; of an even number, the worse of the middle two), so that the
// plot's caption matches the table's median goodput.
func (r report) plotted() map[runKey]outcome {
	out := make(map[runKey]outcome, len(r.results))
	for k, rs := range r.results {
		if len(rs) == 0 {
			continue
		}
		sorted := slices.Clone(rs)
		slices.SortStableFunc(sorted, func(a, b outcome) int {
			if c := cmpFloat(a.Goodput(), b.Goodput()); c != 0 {
				return c
			}
			return b.Throttled - a.Throttled
		})
		out[k] = sorted[(len(sorted)-1)/2]
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// verdict is one acceptance criterion's outcome. Over several runs of
// pacer's cells, run i of the benchmark is the i-th run of each of pacer's
// cells; the criterion passes only if it held in every one.
type verdict struct {
	Pass   bool
	Ran    bool
	Runs   int      // runs judged
	Held   int      // of those, the runs the criterion held in
	Text   string   // the criterion
	Detail []string // figures behind the verdict
}

func (v verdict) mark() string {
	switch {
	case !v.Ran:
		return "NOT RUN"
	case v.Pass:
		return "PASS"
	}
	return "FAIL"
}

// pacerRuns is the number of runs of pacer's cells: the most any of the
// given styles has.
func (r report) pacerRuns(styles []apisim.Style) int {
	n := 0
	for _, style := range styles {
		n = max(n, len(r.results[runKey{style, clientPacer}]))
	}
	return n
}

// pacerRun returns run i of pacer's cell of the given style.
func (r report) pacerRun(style apisim.Style, i int) (outcome, bool) {
	rs := r.results[runKey{style, clientPacer}]
	if i >= len(rs) {
		return outcome{}, false
	}
	return rs[i], true
}

// judge fills in v by holding runs 0…n-1 to held, which reports whether
// the criterion held in run i, whether pacer ran in it at all, and the
// figures behind a failure (named by the label of the style, with the run
// when there are several).
func judge(v verdict, n int, held func(i int, label func(apisim.Style) string) (ok, ran bool, why []string)) verdict {
	for i := range n {
		label := func(s apisim.Style) string {
			if n > 1 {
				return fmt.Sprintf("%s, run %d", s, i+1)
			}
			return string(s)
		}
		ok, ran, why := held(i, label)
		if !ran {
			continue
		}
		v.Ran = true
		v.Runs++
		if ok {
			v.Held++
		}
		v.Detail = append(v.Detail, why...)
	}
	v.Pass = v.Ran && v.Held == v.Runs
	return v
}

// acceptance checks issue 7's criteria on the results, in every run of
// pacer's cells.
func (r report) acceptance() []verdict {
	header := headerStyles(r.Styles)
	n := r.pacerRuns(header)
	// everyStyle holds run i of pacer's cell of every header style to bad,
	// which returns the figure that breaks the criterion, or "".
	everyStyle := func(bad func(outcome) string) func(int, func(apisim.Style) string) (bool, bool, []string) {
		return func(i int, label func(apisim.Style) string) (ok, ran bool, why []string) {
			for _, style := range header {
				o, found := r.pacerRun(style, i)
				if !found {
					continue
				}
				ran = true
				if b := bad(o); b != "" {
					why = append(why, label(style)+": "+b)
				}
			}
			return len(why) == 0, ran, why
		}
	}

	zero := judge(verdict{Text: "pacer zero-config: 0 server-side 429s after the first response, on every header style"}, n,
		everyStyle(func(o outcome) string {
			if o.ThrottledAfterFirst > 0 {
				return fmt.Sprintf("%d after the first response (%d in all)", o.ThrottledAfterFirst, o.Throttled)
			}
			return ""
		}))
	if zero.Pass {
		every := "every header style"
		if n > 1 {
			every += ", every run"
		}
		zero.Detail = append(zero.Detail, every+": 0")
	}

	good := judge(verdict{Text: fmt.Sprintf("pacer zero-config: goodput ≥ %.2f × quota (0.9 × safety 0.9) on every header style", minHeaderGoodput)}, n,
		everyStyle(func(o outcome) string {
			if o.Goodput() < minHeaderGoodput {
				return fmt.Sprintf("%.3f", o.Goodput())
			}
			return ""
		}))
	if good.Pass {
		lo, at := 2.0, ""
		for _, style := range header {
			for i, o := range r.results[runKey{style, clientPacer}] {
				if o.Goodput() < lo {
					lo, at = o.Goodput(), string(style)
					if n > 1 {
						at = fmt.Sprintf("%s, run %d", style, i+1)
					}
				}
			}
		}
		good.Detail = append(good.Detail, fmt.Sprintf("lowest: %.3f (%s)", lo, at))
	}

	ra := verdict{Text: fmt.Sprintf("Retry-After-only server: pacer has fewer 429s than every reactive peer (%s) at goodput ≥ %.2f", joinKinds(reactive), minRetryAfterGoodput)}
	ps := r.results[runKey{apisim.StyleRetryAfter, clientPacer}]
	if len(ps) == 0 {
		return []verdict{zero, good, ra}
	}
	throttled := func(o outcome) float64 { return float64(o.Throttled) }
	summary := []string{fmt.Sprintf("pacer: %s 429s, goodput %s",
		spread("%.0f", each(ps, throttled), higherWorse), spread("%.3f", each(ps, outcome.Goodput), lowerWorse))}
	peers := map[clientKind]float64{} // each reactive peer's 429s (the median of its runs)
	for _, kind := range reactive {
		rs := r.results[runKey{apisim.StyleRetryAfter, kind}]
		if len(rs) == 0 {
			summary = append(summary, fmt.Sprintf("%s: not run", kind))
			continue
		}
		peers[kind], _ = medianWorst(each(rs, throttled), higherWorse)
		summary = append(summary, fmt.Sprintf("%s: %s 429s, goodput %s", kind,
			spread("%.0f", each(rs, throttled), higherWorse), spread("%.3f", each(rs, outcome.Goodput), lowerWorse)))
	}
	ra = judge(ra, len(ps), func(i int, label func(apisim.Style) string) (ok, ran bool, why []string) {
		p := ps[i]
		ok = p.Goodput() >= minRetryAfterGoodput
		for _, kind := range reactive {
			if peer, found := peers[kind]; found && float64(p.Throttled) >= peer {
				ok = false
			}
		}
		if !ok && len(ps) > 1 {
			why = append(why, fmt.Sprintf("run %d: %d 429s, goodput %.3f", i+1, p.Throttled, p.Goodput()))
		}
		return ok, true, why
	})
	ra.Detail = append(summary, ra.Detail...)
	return []verdict{zero, good, ra}
}

func (r report) writeAcceptance(w io.Writer) error {
	var b strings.Builder
	for _, v := range r.acceptance() {
		fmt.Fprintf(&b, "- **%s**", v.mark())
		if v.Ran && v.Runs > 1 {
			fmt.Fprintf(&b, " (held in %d of %d runs)", v.Held, v.Runs)
		}
		fmt.Fprintf(&b, ": %s", v.Text)
		if len(v.Detail) > 0 {
			fmt.Fprintf(&b, ". %s", strings.Join(v.Detail, "; "))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r report) writeMarkdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Adaptation benchmark: pacer against what users pick instead\n\n")
	p("Every client faces the same simulated rate-limited API (`internal/apisim`, one per header style, served\n")
	p("over loopback HTTP by `httptest.Server`, in real time) and the same closed-loop workload: %d workers, each\n", r.Workers)
	p("sending GET requests one after another for %v (%d windows). The API allows %d requests per %v window\n", r.Duration, r.Windows, r.Quota, r.Window)
	counting := "fixed window, except a token (leaky) bucket for Shopify"
	if r.Algorithm != "" {
		counting = string(r.Algorithm)
	}
	p("(%.0f req/s; %s) and takes %v to answer. Every run gets a\n", r.quotaRate(), counting, r.Latency)
	p("fresh server and a fresh client; %d runs go side by side, each with its own server, client and\n", r.Parallel)
	p("connections. Generated by `bench/adapt`; do not edit by hand.\n\n")
	if n := max(1, r.Runs); n > 1 {
		p("pacer's cells ran %d times each (each run with a fresh server and client); the peers ran once. Every\n", n)
		p("figure in pacer's rows is the median of its %d runs and, in brackets where it differs, the worst run's:\n", n)
		p("lower goodput and fewer calls, more 429s, caller errors and calls cut off, higher added latency. Each\n")
		p("figure's worst is taken on its own, so the bracketed figures of one row may come from different runs.\n")
		p("pacer is held to the acceptance criteria in every run: run i of the benchmark is the i-th run of each\n")
		p("of pacer's cells, and a criterion that fails in any run is a FAIL.\n\n")
	} else {
		p("Every cell ran once (`-runs N` runs pacer's N times and shows the median and the worst).\n\n")
	}
	p("The windows are short so that the whole benchmark is quick (real quotas have windows of a minute or more).\n")
	p("Styles that state the reset in whole seconds (IETF `t=`/`reset=`, GitHub and Anthropic instants) round it\n")
	p("up, as real servers do, so a client that believes them waits up to a second longer than needed each\n")
	p("window: %.0f%% of a %v window on average, under 1%% of a one-minute window. Scale with `-window`.\n\n", 50/r.Window.Seconds(), r.Window)

	p("## Acceptance (issue 7)\n\n")
	if err := r.writeAcceptance(&b); err != nil {
		return err
	}
	p("\n## Results\n\n")
	if err := r.writeTable(&b); err != nil {
		return err
	}
	if r.SVG != "" {
		p("\n## Requests per second over time\n\n")
		p("![Requests per second over time, per header style and client, against the quota](%s)\n\n", filepath.Base(r.SVG))
		p("Blue: requests the server admitted per %v bin, as a rate; red, stacked on top: those it answered 429.\n", r.Bin)
		p("Dashed: the quota; dotted: 0.9 × quota, where pacer's default safety factor aims. Caption: goodput / quota · server 429s.\n")
		if n := max(1, r.Runs); n > 1 {
			p("pacer's panels show its median run of %d by goodput (runs ordered from the lowest goodput, ties from the\n", n)
			p("most 429s), so the caption's goodput is the table's median.\n")
		}
	}

	p("\n## Columns\n\n")
	p("- **goodput / quota**: requests the server admitted during the run ÷ the requests the quota allowed in it:\n")
	p("  apisim's `Capacity` (%d per %v over the run, whose windows start with it), plus the initial burst for a\n", r.Quota, r.Window)
	p("  token bucket, which starts full. 1.00 is all of it; pacer aims at 0.90 (its default safety factor).\n")
	p("- **server 429s**: requests the server answered 429 during the run, retries included.\n")
	p("- **429s after 1st response**: of those, the ones the server received after the client had its first\n")
	p("  response: the 429s a client that learns from responses could have avoided.\n")
	p("- **caller errors**: calls that returned an error or a non-2xx response to the caller: what application\n")
	p("  code has to handle. **cut off at end**: calls still waiting or in flight when the run ended (not errors).\n")
	p("- **added p50 / p99**: per call, the caller-visible duration minus the wire time of the attempt whose\n")
	p("  response it got (time in limiter waits, retry backoffs and failed attempts); all calls, cut-off ones with\n")
	p("  the time they had waited so far. The server's %v service time is not included.\n", r.Latency)

	p("\n## Clients\n\n")
	for _, kind := range allClients() {
		p("- **%s**: %s.\n", kind, clientDescriptions[kind])
	}
	p("\nEvery client sends through the same base: an `http.Transport` keeping %d idle connections per host, under a\n", r.Workers)
	p("thin wrapper that times each attempt on the wire.\n")

	p("\n## How it was made\n\n")
	p("```\ncd bench && %s\n```\n\n", r.Command)
	total := 0
	for _, rs := range r.results {
		total += len(rs)
	}
	p("Took %v for %d runs, %d at a time; the process used %s. Load average (1 min) %s before, %s after:\n",
		r.elapsed.Round(time.Second), total, r.Parallel, cpuUsed(r.elapsed), r.loadBefore, loadAverage())
	p("other work on the machine shares its CPUs with the runs. Machine: %s.\n", machine())
	_, err := io.WriteString(w, b.String())
	return err
}

// machine describes where the benchmark ran: CPUs (as nproc counts them), Go
// version, kernel.
func machine() string {
	uname := runtime.GOOS + "/" + runtime.GOARCH
	if out, err := exec.Command("uname", "-srm").Output(); err == nil {
		uname = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%d CPUs (`nproc`), %s, `%s`", runtime.NumCPU(), runtime.Version(), uname)
}

// loadAverage is the 1-minute load average, "unknown" where /proc has none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// cpuUsed tells how busy the benchmark kept the machine: runs side by side
// share its CPUs, so this shows whether they could have slowed each other.
func cpuUsed(wall time.Duration) string {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil || wall <= 0 {
		return "an unknown amount of CPU"
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return fmt.Sprintf("%.1f s of CPU (%.0f%% of one core on average)", cpu.Seconds(), 100*cpu.Seconds()/wall.Seconds())
}

// fmtDur formats a latency compactly: 0, 0.4ms, 12ms, 1.3s.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Round(time.Millisecond)/time.Millisecond)
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// The worst of several runs, shared with the virtual-time tables' -runs
// (runs_test.go): every figure is shown as the median of its runs and, in
// brackets where it differs, the worst run's.

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
	return spreadFunc(func(x float64) string { return fmt.Sprintf(format, x) }, xs, w)
}

// spreadFunc is spread with a formatting function.
func spreadFunc(format func(float64) string, xs []float64, w worse) string {
	median, worst := medianWorst(xs, w)
	s := format(median)
	if len(xs) > 1 && format(worst) != s {
		s += " (" + format(worst) + ")"
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
