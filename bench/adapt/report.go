package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

// report renders the results: the table, the acceptance verdicts, RESULTS.md.
type report struct {
	options
	results    map[runKey]outcome
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
	for _, style := range r.Styles {
		for _, kind := range r.Clients {
			o, ok := r.results[runKey{style, kind}]
			if !ok {
				continue
			}
			name := string(kind)
			if kind == clientPacer {
				name = "**pacer**"
			}
			fmt.Fprintf(&b, "| %s | %s | %.2f | %d | %d | %d | %d | %d | %s | %s |\n",
				style, name, o.Goodput(), o.Throttled, o.ThrottledAfterFirst, o.Failed, o.CutOff, o.Calls,
				fmtDur(o.AddedP50), fmtDur(o.AddedP99))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// verdict is one acceptance criterion's outcome.
type verdict struct {
	Pass   bool
	Ran    bool
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

// acceptance checks issue 7's criteria on the results.
func (r report) acceptance() []verdict {
	var vs []verdict

	zero := verdict{Pass: true, Text: "pacer zero-config: 0 server-side 429s after the first response, on every header style"}
	good := verdict{Pass: true, Text: fmt.Sprintf("pacer zero-config: goodput ≥ %.2f × quota (0.9 × safety 0.9) on every header style", minHeaderGoodput)}
	for _, style := range headerStyles(r.Styles) {
		o, ok := r.results[runKey{style, clientPacer}]
		if !ok {
			continue
		}
		zero.Ran, good.Ran = true, true
		if o.ThrottledAfterFirst > 0 {
			zero.Pass = false
			zero.Detail = append(zero.Detail, fmt.Sprintf("%s: %d after the first response (%d in all)", style, o.ThrottledAfterFirst, o.Throttled))
		}
		if o.Goodput() < minHeaderGoodput {
			good.Pass = false
			good.Detail = append(good.Detail, fmt.Sprintf("%s: %.3f", style, o.Goodput()))
		}
	}
	if zero.Pass && zero.Ran {
		zero.Detail = append(zero.Detail, "every header style: 0")
	}
	if good.Pass && good.Ran {
		lo, at := 2.0, apisim.Style("")
		for _, style := range headerStyles(r.Styles) {
			if o, ok := r.results[runKey{style, clientPacer}]; ok && o.Goodput() < lo {
				lo, at = o.Goodput(), style
			}
		}
		good.Detail = append(good.Detail, fmt.Sprintf("lowest: %.3f (%s)", lo, at))
	}
	vs = append(vs, zero, good)

	ra := verdict{Text: fmt.Sprintf("Retry-After-only server: pacer has fewer 429s than every reactive peer (%s) at goodput ≥ %.2f", joinKinds(reactive), minRetryAfterGoodput)}
	if p, ok := r.results[runKey{apisim.StyleRetryAfter, clientPacer}]; ok {
		ra.Ran, ra.Pass = true, p.Goodput() >= minRetryAfterGoodput
		ra.Detail = append(ra.Detail, fmt.Sprintf("pacer: %d 429s, goodput %.3f", p.Throttled, p.Goodput()))
		for _, kind := range reactive {
			peer, ok := r.results[runKey{apisim.StyleRetryAfter, kind}]
			if !ok {
				ra.Detail = append(ra.Detail, fmt.Sprintf("%s: not run", kind))
				continue
			}
			ra.Pass = ra.Pass && p.Throttled < peer.Throttled
			ra.Detail = append(ra.Detail, fmt.Sprintf("%s: %d 429s, goodput %.3f", kind, peer.Throttled, peer.Goodput()))
		}
	}
	return append(vs, ra)
}

func (r report) writeAcceptance(w io.Writer) error {
	var b strings.Builder
	for _, v := range r.acceptance() {
		fmt.Fprintf(&b, "- **%s**: %s", v.mark(), v.Text)
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
	p("fresh server and a fresh client; the runs of one style go side by side, each with its own server, client\n")
	p("and connections. Generated by `bench/adapt`; do not edit by hand.\n\n")
	p("The windows are short so that the whole benchmark is (real quotas have windows of a minute or more).\n")
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
	p("Took %v, %d runs at a time; the process used %s. Load average (1 min) %s before, %s after:\n",
		r.elapsed.Round(time.Second), r.Parallel, cpuUsed(r.elapsed), r.loadBefore, loadAverage())
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
