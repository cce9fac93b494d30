package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
)

// The executor's concurrency (issue 37): pacer's Executor with an adaptive
// bound (WithAdaptiveConcurrency(1, 256)) beside fixed bounds of 4, 16, 64
// and 256, against apisim's ConcurrencyServer (latency grows past a knee,
// 503s above a ceiling) in virtual time.
//
//	cd bench && go test ./adapt -run TestConcurrency -v                                   # table in the log
//	cd bench && go test ./adapt -run TestConcurrency -args -runs 20 -concurrency.md $PWD/CONCURRENCY.md
var concurrencyMD = flag.String("concurrency.md", "", "write the executor concurrency table to this markdown file")

// concWorkers is every scenario's callers: twice the largest bound, so
// that demand fills every bound.
const concWorkers = 512

// concBackoff is how long a caller waits after a shed answer (or an error)
// before its next call, as a client backs off from a 503.
const concBackoff = time.Second

// concScenario is one server shape.
type concScenario struct {
	name   string
	server apisim.ConcurrencyConfig
	// quota, when set, is a rate limit in front of the server; the
	// executor's client is then a pacer Transport, which paces to it.
	quota *apisim.Config
	run   time.Duration
	// heldThroughput and heldP99, when set, replace concHeldThroughput
	// and concHeldP99 for a scenario whose known gap is wider.
	heldThroughput, heldP99 float64
}

// concBound is a bound under test: fixed n, or adaptive (n == 0).
type concBound int

const concAdaptive concBound = 0

var concBounds = []concBound{4, 16, 64, 256, concAdaptive}

func (b concBound) String() string {
	if b == concAdaptive {
		return "adaptive"
	}
	return fmt.Sprintf("fixed %d", int(b))
}

func (b concBound) option() pacer.ExecutorOption {
	if b == concAdaptive {
		return pacer.WithAdaptiveConcurrency(1, 256)
	}
	return pacer.WithMaxConcurrency(int(b))
}

// concScenarios are the server shapes: knees at 8, 32 and 128 (between the
// fixed bounds) and at 16 (on one), ceilings above and at the knee, stated
// and not, latencies from 20 ms to 2 s, and a rate limit that binds first.
func concScenarios() []concScenario {
	ms := time.Millisecond
	shape := func(latency time.Duration, knee, ceiling int, jitter float64) apisim.ConcurrencyConfig {
		return apisim.ConcurrencyConfig{Latency: latency, Knee: knee, Ceiling: ceiling, Jitter: jitter, ShedLatency: latency / 10}
	}
	stated := shape(100*ms, 32, 24, 0.1)
	stated.StateCeiling = true
	llm := shape(2*time.Second, 24, 96, 0.5)
	llm.Shed = 529
	return []concScenario{
		{name: "knee 8, no ceiling, 100 ms", server: shape(100*ms, 8, 0, 0.1), run: time.Minute},
		{name: "knee 16, no ceiling, 100 ms", server: shape(100*ms, 16, 0, 0.1), run: time.Minute},
		{name: "knee 32, ceiling 48, 100 ms", server: shape(100*ms, 32, 48, 0.1), run: time.Minute},
		{name: "knee 32, ceiling 32, 100 ms", server: shape(100*ms, 32, 32, 0.1), run: time.Minute},
		{name: "knee 32, ceiling 24 stated, 100 ms", server: stated, run: time.Minute},
		{name: "knee 128, ceiling 160, 50 ms", server: shape(50*ms, 128, 160, 0.1), run: time.Minute},
		{name: "fast API, big quota: knee 1,000, 20 ms", server: shape(20*ms, 1000, 0, 0.1), run: 20 * time.Second},
		{name: "LLM-like: knee 24, 529 above 96, 2 s ± 50%", server: llm, run: 10 * time.Minute, heldThroughput: 0.8},
		{name: "rate-limited: 300/s paced, knee 64, 100 ms", server: shape(100*ms, 64, 0, 0.1),
			quota: &apisim.Config{Style: apisim.StyleIETF, Algorithm: apisim.TokenBucket, Limit: 300, Window: time.Second}, run: time.Minute},
	}
}

// concRun is what one (scenario, bound) run measured.
type concRun struct {
	ok, shed, errs int
	throughput     float64 // successful calls per second over the whole run
	// p99s of successful calls: the caller's (Do's whole duration, the
	// wait for a slot included), the request's (from its slot on: the
	// Transport's pacing and the server) and the server's alone.
	p99, p99Req, p99Server time.Duration
	bound                  int // the bound at the end
	stats                  pacer.ExecutorStats
}

// serverTap times each request at the server (below any pacer Transport).
type serverTap struct {
	base http.RoundTripper
	mu   sync.Mutex
	took []time.Duration
}

func (s *serverTap) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := s.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusOK {
		s.mu.Lock()
		s.took = append(s.took, time.Since(start))
		s.mu.Unlock()
	}
	return resp, err
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*99/100)]
}

// runConc runs one bound against a fresh server of sc's shape.
func runConc(t *testing.T, sc concScenario, b concBound, seed uint64) concRun {
	var r concRun
	synctest.Test(t, func(t *testing.T) {
		cfg := sc.server
		cfg.Seed = seed
		var quota *apisim.Server
		if sc.quota != nil {
			quota = apisim.New(*sc.quota)
		}
		srv := apisim.NewConcurrency(cfg, quota)
		tap := &serverTap{base: srv.Transport()}
		var below http.RoundTripper = tap
		if sc.quota != nil {
			below = pacer.NewTransport(tap)
		}
		reqTap := &serverTap{base: below}
		client := &http.Client{Transport: reqTap}
		exec := pacer.NewExecutor(client, b.option())
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for range concWorkers {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/x", nil)
					start := time.Now()
					resp, err := exec.Do(ctx, req)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					took := time.Since(start)
					if ctx.Err() != nil {
						return // cut off by the run's end
					}
					mu.Lock()
					switch {
					case err != nil:
						r.errs++
					case resp.StatusCode == http.StatusOK:
						r.ok++
						lat = append(lat, took)
					default:
						r.shed++
					}
					mu.Unlock()
					if err != nil || resp.StatusCode != http.StatusOK {
						time.Sleep(concBackoff)
					}
				}
			})
		}
		time.Sleep(sc.run)
		r.stats = exec.Stats()
		cancel()
		wg.Wait()
		if err := exec.Close(); err != nil {
			t.Error(err)
		}
		r.throughput = float64(r.ok) / sc.run.Seconds()
		r.p99 = p99(lat)
		r.p99Server = p99(tap.took)
		r.p99Req = p99(reqTap.took)
		r.bound = r.stats.MaxConcurrency
	})
	return r
}

// concCompare is one run of a scenario: every bound, and the adaptive
// one's figures against the best fixed bound's.
type concCompare struct {
	runs      map[concBound]concRun
	best      concBound
	thr, p99s float64 // adaptive ÷ the highest fixed throughput; adaptive ÷ best: caller's p99
	req, srv  float64 // adaptive ÷ best: request's and server's p99
	shedOver  int     // adaptive's 503s less the best's (≤ 0 is the target)
}

// bestFixed is the fixed bound a user would pick, having tried them all:
// the highest throughput; within 2% of it, fewer 503s, then the lower
// caller's p99.
func bestFixed(runs map[concBound]concRun) concBound {
	top := 0.0
	for _, b := range concBounds[:4] {
		top = max(top, runs[b].throughput)
	}
	best := concBound(-1)
	for _, b := range concBounds[:4] {
		r := runs[b]
		if r.throughput < 0.98*top {
			continue
		}
		if best < 0 {
			best = b
			continue
		}
		cur := runs[best]
		if r.shed < cur.shed || (r.shed == cur.shed && r.p99Req < cur.p99Req) {
			best = b
		}
	}
	return best
}

// compareConc compares the adaptive bound with the fixed ones: its
// throughput with the highest of theirs (the best pick's may be up to 2%
// lower: judged against it, the adaptive bound would be let off that
// much), its p99s and 503s with the best pick's.
func compareConc(runs map[concBound]concRun) concCompare {
	c := concCompare{runs: runs, best: bestFixed(runs)}
	a, f := runs[concAdaptive], runs[c.best]
	top := 0.0
	for _, b := range concBounds[:4] {
		top = max(top, runs[b].throughput)
	}
	c.thr = a.throughput / top
	c.p99s = float64(a.p99) / float64(f.p99)
	c.req = float64(a.p99Req) / float64(f.p99Req)
	c.srv = float64(a.p99Server) / float64(f.p99Server)
	c.shedOver = a.shed - f.shed
	return c
}

// concPacedMin is the share of a rate-limited scenario's stated rate
// that every fixed bound with slots enough for it (the rate times the
// server's latency) must reach for the run to judge the Executor: a
// Transport that paces a closed loop of callers under its stated rate
// sets every figure of the run, not the bound.
const concPacedMin = 0.9

// concUnjudged says why a run of sc cannot judge the adaptive bound, or "".
func concUnjudged(sc concScenario, c concCompare) string {
	if sc.quota == nil {
		return ""
	}
	rate := float64(sc.quota.Limit) / sc.quota.Window.Seconds()
	for _, b := range concBounds[:4] {
		if float64(b) < rate*sc.server.Latency.Seconds() {
			continue // too few slots to reach the rate
		}
		if got := c.runs[b].throughput; got < concPacedMin*rate {
			return fmt.Sprintf("not judged: the pacer Transport paced %v's callers to %.0f/s of the stated %.0f/s", b, got, rate)
		}
	}
	return ""
}

// The targets, judged in every run against the best fixed bound.
const (
	concMinThroughput = 0.95
	concMaxP99        = 1.2
)

// The bounds the test holds every run to. The targets are not met
// in every run of every scenario (CONCURRENCY.md lists the runs that miss
// them, and the test logs each as a known gap); these fail a collapse,
// the bound lost or run away, without failing CI on the spread of a
// virtual-time run's goroutine ordering.
const (
	concHeldThroughput = 0.85
	concHeldP99        = 1.6
)

// concCheck is one target in one run: whether it was met, and whether the
// run kept the bound the test holds (the target, or a known gap's bound).
type concCheck struct {
	what, want string
	met, held  bool
}

func concChecks(sc concScenario, c concCompare) []concCheck {
	thrHeld, p99Held := concHeldThroughput, concHeldP99
	if sc.heldThroughput > 0 {
		thrHeld = sc.heldThroughput
	}
	if sc.heldP99 > 0 {
		p99Held = sc.heldP99
	}
	return []concCheck{
		{what: fmt.Sprintf("throughput %.3f of the best fixed bound's (%v)", c.thr, c.best), want: fmt.Sprintf("≥ %.2f", concMinThroughput),
			met: c.thr >= concMinThroughput, held: c.thr >= thrHeld},
		{what: fmt.Sprintf("request p99 %.2f× the best fixed bound's (%v)", c.req, c.best), want: fmt.Sprintf("≤ %.1f×", concMaxP99),
			met: c.req <= concMaxP99, held: c.req <= p99Held},
		{what: fmt.Sprintf("%d more 503s than the best fixed bound (%v)", c.shedOver, c.best), want: "none more",
			met: c.shedOver <= 0, held: c.shedOver <= 0},
	}
}

func TestConcurrency(t *testing.T) {
	if raceEnabled {
		t.Skip("virtual-time figures; the race detector only slows them")
	}
	scs := concScenarios()
	results := make([][]concCompare, len(scs))
	for i, sc := range scs {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			for run := range runs() {
				rs := map[concBound]concRun{}
				for _, b := range concBounds {
					rs[b] = runConc(t, sc, b, uint64(run+1))
				}
				c := compareConc(rs)
				results[i] = append(results[i], c)
				a := rs[concAdaptive]
				t.Logf("run %d: best %v; adaptive throughput %.3f×, request p99 %.2f× (caller's %.2f×, server's %.2f×), 503s %d vs %d; bound %d (moves %+v, last %v)",
					run+1, c.best, c.thr, c.req, c.p99s, c.srv, a.shed, rs[c.best].shed, a.bound, a.stats.Moves, a.stats.LastMove)
				for _, b := range concBounds {
					r := rs[b]
					t.Logf("    %-9v %7.1f/s  p99 request %-8v caller %-8v server %-8v 503s %-6d errors %d", b, r.throughput,
						r.p99Req.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.p99Server.Round(time.Millisecond), r.shed, r.errs)
				}
				if why := concUnjudged(sc, c); why != "" {
					t.Logf("run %d: %s", run+1, why)
					continue
				}
				for _, chk := range concChecks(sc, c) {
					switch {
					case !chk.held:
						t.Errorf("run %d: %s (want %s)", run+1, chk.what, chk.want)
					case !chk.met:
						t.Logf("run %d: known gap: %s (the issue's target %s)", run+1, chk.what, chk.want)
					}
				}
			}
		})
	}
	t.Cleanup(func() {
		md := concurrencyTable(scs, results)
		t.Log("\n" + md)
		if *concurrencyMD != "" {
			if err := os.WriteFile(*concurrencyMD, []byte(md), 0o644); err != nil {
				t.Error(err)
			}
		}
	})
}

// concurrencyTable renders the worst of each scenario's runs.
func concurrencyTable(scs []concScenario, results [][]concCompare) string {
	var b strings.Builder
	b.WriteString(concHeader)
	fmt.Fprintf(&b, "Worst of %d runs per scenario.\n\n", runs())
	b.WriteString("| scenario | best fixed | throughput ÷ highest fixed | request p99 ÷ best | caller's p99 ÷ best | server's p99 ÷ best | 503s: adaptive (best) | adaptive's bound at the end | throughput/s: 4 · 16 · 64 · 256 · adaptive |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for i, sc := range scs {
		cs := results[i]
		if len(cs) == 0 {
			continue
		}
		worstThr, worstReq, worstP99, worstSrv, worstShed := cs[0], cs[0], cs[0], cs[0], cs[0]
		bestSet := map[string]bool{}
		var bounds []int
		for _, c := range cs {
			if c.thr < worstThr.thr {
				worstThr = c
			}
			if c.req > worstReq.req {
				worstReq = c
			}
			if c.p99s > worstP99.p99s {
				worstP99 = c
			}
			if c.srv > worstSrv.srv {
				worstSrv = c
			}
			if c.shedOver > worstShed.shedOver {
				worstShed = c
			}
			bestSet[c.best.String()] = true
			bounds = append(bounds, c.runs[concAdaptive].bound)
		}
		slices.Sort(bounds)
		var best []string
		for k := range bestSet {
			best = append(best, k)
		}
		slices.Sort(best)
		var thr []string
		for _, bd := range concBounds {
			thr = append(thr, fmt.Sprintf("%.0f", worstThr.runs[bd].throughput))
		}
		fmt.Fprintf(&b, "| %s | %s | %.3f | %.2f | %.2f | %.2f | %d (%d) | %d–%d | %s |\n", sc.name, strings.Join(best, ", "),
			worstThr.thr, worstReq.req, worstP99.p99s, worstSrv.srv, worstShed.runs[concAdaptive].shed, worstShed.runs[worstShed.best].shed,
			bounds[0], bounds[len(bounds)-1], strings.Join(thr, " · "))
	}
	var gaps strings.Builder
	for i, sc := range scs {
		var missed [3]int // by concChecks' order
		unjudged := 0
		for _, c := range results[i] {
			if concUnjudged(sc, c) != "" {
				unjudged++
				continue
			}
			for k, chk := range concChecks(sc, c) {
				if !chk.met {
					missed[k]++
				}
			}
		}
		if unjudged > 0 {
			fmt.Fprintf(&gaps, "- %s: not judged in %d of %d runs: the pacer Transport paced a fixed bound with slots enough for the stated rate under %.0f%% of it.\n",
				sc.name, unjudged, len(results[i]), 100*concPacedMin)
		}
		for k, name := range [...]string{"throughput ≥ 0.95", "request p99 ≤ 1.2×", "no more 503s than the best fixed bound"} {
			if missed[k] > 0 {
				fmt.Fprintf(&gaps, "- %s: %s missed in %d of %d runs.\n", sc.name, name, missed[k], len(results[i]))
			}
		}
	}
	if gaps.Len() == 0 {
		b.WriteString("\nThe adaptive bound meets every target in every run above.\n")
	} else {
		b.WriteString("\n**Targets missed** (the test holds every run to throughput ≥ 0.85 (the LLM-like row 0.8) and request p99 ≤ 1.6×, so that a collapse still fails):\n\n")
		b.WriteString(gaps.String())
	}
	b.WriteString(concFooter)
	return b.String()
}

const concHeader = `# The Executor's concurrency: adaptive against fixed bounds (issue 37)

Generated by ` + "`cd bench && go test ./adapt -run TestConcurrency -args -runs 20 -concurrency.md $PWD/CONCURRENCY.md`" + `
(virtual time, testing/synctest, against internal/apisim's ConcurrencyServer; do not edit by hand).

Each scenario runs pacer's Executor with fixed bounds of 4, 16, 64 and 256 (` + "`WithMaxConcurrency`" + `) and
with ` + "`WithAdaptiveConcurrency(1, 256)`" + `, each against a fresh server, 512 callers looping ` + "`Do`" + ` for the whole run
(a caller whose call is shed waits a second before its next). The server serves its knee at once in its
latency, queues beyond it (latency × in-progress ÷ knee, so throughput stays flat), and sheds above its
ceiling with a 503 (529 for the LLM-like one) answered in a tenth of its latency; every service time carries
log-normal jitter. In the rate-limited scenario a pacer Transport paces to a stated 300 requests a second
(a token bucket of 300)
in front of the server.

- **best fixed**: the fixed bound a user would pick having tried them all, per run: the highest
  throughput, and within 2% of it the fewest 503s, then the lowest p99.
- **throughput**: successful calls per second over the whole run (a slow start costs), against the
  highest of the fixed bounds' (not the best pick's, which may be up to 2% lower).
- **p99**: of successful calls as the caller sees them: ` + "`Do`" + `'s whole duration, the wait for a slot
  (and the Transport's pacing) included, which is what a caller waits. **server p99**: the server's part
  only, measured at the server.
- Every ratio is adaptive ÷ best fixed in the same run; the table shows each one's worst run.
  Targets: throughput ≥ 0.95, p99 ≤ 1.2, no more 503s than the best fixed bound.

`

// concFooter closes CONCURRENCY.md.
const concFooter = `
Why the caller's p99 is not the one held: 512 callers loop, so by Little's law a caller waits
512 ÷ throughput on average whatever the bound, and a bound that sheds half its calls (fixed 64 and 256
past a ceiling) sends most callers into their one-second backoff, where no latency is counted: its
caller's p99 is low because it refuses the work. The request's p99 (from the slot on) is what the bound
changes: queueing at the server, or in the Transport's rate limiter, which the caller's p99 contains too.
`
