package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
)

// The below-quota benchmark: what a client far from its quota feels, in
// virtual time (testing/synctest) so that hourly and daily windows run in
// milliseconds, against the in-memory apisim transport. It complements the
// saturated, real-time table of the adapt command.
//
//	cd bench && go test ./adapt -run TestBelowQuota -v                      # tables in the log
//	cd bench && go test ./adapt -run TestBelowQuota -args -jobs.md ../bench/JOBS.md
var jobsMD = flag.String("jobs.md", "", "write the below-quota tables to this markdown file")

const (
	jobWorkers = 16
	jobLatency = 50 * time.Millisecond
	// firstLook is what the first request to an unknown endpoint costs a
	// job: it goes alone, one round trip.
	firstLook = jobLatency
)

// quotaShape is one API quota a job runs against: a fifth of it is already
// spent by someone else when the job starts.
type quotaShape struct {
	style  apisim.Style
	limit  int
	window time.Duration
}

func (q quotaShape) spent() int     { return q.limit / 5 }
func (q quotaShape) remaining() int { return q.limit - q.spent() }
func (q quotaShape) String() string {
	return fmt.Sprintf("%s %d/%s", q.style, q.limit, shortDuration(q.window))
}

func shortDuration(d time.Duration) string {
	switch d {
	case time.Minute:
		return "min"
	case time.Hour:
		return "h"
	case 24 * time.Hour:
		return "day"
	}
	return d.String()
}

// jobClients are the clients of the below-quota tables: pacer, no limiter,
// and a user's hand-made x/time/rate limiter at the documented quota.
var jobClients = []clientKind{clientPacer, clientPlain, clientXRate, clientRetryable}

// jobRun is one job's outcome.
type jobRun struct {
	elapsed          time.Duration
	errors, late429s int
}

// runJob sends n requests from jobWorkers workers through kind against a
// fresh server of shape q, and reports when the last one finished.
func runJob(t *testing.T, q quotaShape, kind clientKind, n int) jobRun {
	var r jobRun
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(apisim.Config{Style: q.style, Limit: q.limit, Window: q.window, Latency: jobLatency})
		rt := srv.Transport()
		for range q.spent() { // someone else's spending, before the job
			req, _ := http.NewRequest(http.MethodGet, "http://other.test/v1/x", nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		before := len(srv.Events())
		client, err := newClient(kind, rt, scenario{Quota: q.limit, Window: q.window})
		if err != nil {
			t.Fatal(err)
		}
		if kind == clientPacer && q.window > pacer.DefaultMaxDelay {
			// By default no wait is longer than an hour: a job that needs
			// tomorrow's quota is refused at once, with the reset. One that
			// means to wait says so.
			client = &http.Client{Transport: pacer.NewTransport(rt, pacer.WithMaxWait(2*q.window))}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*q.window)
		defer cancel()
		var next, errs atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range jobWorkers {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/x", nil)
					resp, err := client.Do(req)
					if err != nil {
						errs.Add(1)
						continue
					}
					if resp.StatusCode != http.StatusOK {
						errs.Add(1)
					}
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		r.elapsed = time.Since(start)
		r.errors = int(errs.Load())
		events := srv.Events()[before:]
		if len(events) > 0 {
			first := events[0].At.Add(jobLatency)
			for _, e := range events {
				if e.Status == http.StatusTooManyRequests && !e.At.Before(first) {
					r.late429s++
				}
			}
		}
		client.CloseIdleConnections()
	})
	return r
}

// unpaced is a job's time with no limiter and no quota: rounds of
// jobWorkers requests, one latency each.
func unpaced(n int) time.Duration {
	return time.Duration((n+jobWorkers-1)/jobWorkers) * jobLatency
}

// fastest is the 429-free lower bound: what is left of the current window at
// once, each later window's limit at its start.
func fastest(q quotaShape, n int) time.Duration {
	if n <= q.remaining() {
		return unpaced(n)
	}
	rest := n - q.remaining()
	windows := (rest + q.limit - 1) / q.limit
	last := rest - (windows-1)*q.limit
	untilReset := q.window - time.Duration(q.spent())*jobLatency
	return untilReset + time.Duration(windows-1)*q.window + unpaced(last)
}

// TestBelowQuotaJobsAndPoissonLoad measures the two below-quota figures of
// issue 11 (job time against job size on minute, hour and day windows;
// added delay against Poisson load) for pacer and the peers, and holds
// pacer to the targets: a job within the remaining quota within 1.25× its
// unpaced time besides the first look (one round trip), a quota-bound one within 1.10× of the fastest 429-free
// schedule, no caller errors and no 429 after the first response; at
// Poisson loads up to half the quota, p99 added delay at most 100 ms.
func TestBelowQuotaJobsAndPoissonLoad(t *testing.T) {
	shapes := []quotaShape{
		{apisim.StyleGitHub, 600, time.Minute},
		{apisim.StyleIETF, 600, time.Minute},
		{apisim.StyleOpenAI, 600, time.Minute},
		{apisim.StyleGitHub, 5000, time.Hour},
		{apisim.StyleIETF, 5000, time.Hour},
		{apisim.StyleOpenAI, 5000, time.Hour},
		{apisim.StyleGitHub, 10000, 24 * time.Hour},
		{apisim.StyleIETF, 10000, 24 * time.Hour},
	}
	sizes := []float64{0.02, 0.10, 0.50, 1.00, 3.00}
	var md strings.Builder
	md.WriteString(belowQuotaHeader)
	if runs() > 1 {
		fmt.Fprintf(&md, "pacer's cells ran %d times each (each its own goroutine ordering; Poisson arrivals seeded afresh): every figure is the median and, in brackets where it differs, the worst run's; `e`/`t` are the worst run's. pacer is held to the targets in every run; the peers ran once.\n\n", runs())
	}
	md.WriteString("### Job time ÷ unpaced time (÷ fastest 429-free schedule for jobs above the quota)\n\n")
	md.WriteString("16 workers, 50 ms per request, a fifth of the quota already spent by someone else; job sizes as a share of the remaining quota. `e` = caller errors, `t` = 429s after the first response. pacer runs with zero configuration, except `WithMaxWait(48h)` on day windows: by default no wait is longer than an hour, so a job that needs tomorrow's quota is refused at once with the reset.\n\n")
	md.WriteString("| quota | client |")
	for _, s := range sizes {
		fmt.Fprintf(&md, " %g%% |", 100*s)
	}
	md.WriteString("\n| --- | --- |" + strings.Repeat(" ---: |", len(sizes)) + "\n")
	for _, q := range shapes {
		for _, kind := range jobClients {
			fmt.Fprintf(&md, "| %s | %s |", q, kind)
			for _, s := range sizes {
				n := max(1, int(math.Round(s*float64(q.remaining()))))
				base := unpaced(n)
				if n > q.remaining() {
					base = fastest(q, n)
				}
				limit := 1.25
				if n > q.remaining() {
					limit = 1.10
				}
				rs := make([]jobRun, runs())
				if kind != clientPacer {
					rs = rs[:1] // measured, not held: once
				}
				for i := range rs {
					rs[i] = runJob(t, q, kind, n)
					r := rs[i]
					ratio := r.elapsed.Seconds() / base.Seconds()
					// The first request to an endpoint nobody knows goes
					// alone (issue 24, DESIGN.md): one round trip, once per
					// endpoint per process, that no limit on the rest can
					// hide on a job of one or three rounds. The limit holds
					// for the rest of the job.
					held := (r.elapsed - firstLook).Seconds() / base.Seconds()
					if kind == clientPacer && (held > limit || r.errors > 0 || r.late429s > 0) {
						t.Errorf("pacer, %s, job of %g%% (%d requests), run %d of %d: %.2f× (%.2f× besides the first look; limit %.2f×), %d errors, %d late 429s",
							q, 100*s, n, i+1, len(rs), ratio, held, limit, r.errors, r.late429s)
					}
				}
				cell := " " + spread("%.2f×", each(rs, func(r jobRun) float64 { return r.elapsed.Seconds() / base.Seconds() }), higherWorse)
				_, errs := medianWorst(each(rs, func(r jobRun) float64 { return float64(r.errors) }), higherWorse)
				_, late := medianWorst(each(rs, func(r jobRun) float64 { return float64(r.late429s) }), higherWorse)
				if errs > 0 || late > 0 {
					cell += fmt.Sprintf(" (e %.0f, t %.0f)", errs, late)
				}
				md.WriteString(cell + " |")
			}
			md.WriteString("\n")
		}
	}

	md.WriteString("\n### Added delay under Poisson arrivals\n\n")
	md.WriteString("Open-loop Poisson arrivals for 3 minutes against a 600/min GitHub-style quota, 50 ms per request: the delay each request sees beyond the server's own time, and the 429s it gets.\n\n")
	md.WriteString("| load | client | p50 added | p99 added | 429s | caller errors |\n| ---: | --- | ---: | ---: | ---: | ---: |\n")
	for _, load := range []float64{0.10, 0.50, 0.80, 1.20} {
		for _, kind := range []clientKind{clientPacer, clientPlain, clientXRate} {
			ps := make([]poissonRun, runs())
			if kind != clientPacer {
				ps = ps[:1]
			}
			for i := range ps {
				ps[i] = runPoisson(t, kind, load, uint64(i))
				if p := ps[i]; kind == clientPacer && load <= 0.5 && p.p99 > 100*time.Millisecond {
					t.Errorf("pacer at %.0f%% of the quota, run %d of %d: p99 added delay %v > 100ms", 100*load, i+1, len(ps), p.p99)
				}
			}
			ms := func(d time.Duration) float64 { return float64(d.Round(time.Millisecond)) / float64(time.Millisecond) }
			fmt.Fprintf(&md, "| %.0f%% | %s | %s | %s | %s | %s |\n", 100*load, kind,
				spread("%.0fms", each(ps, func(p poissonRun) float64 { return ms(p.p50) }), higherWorse),
				spread("%.0fms", each(ps, func(p poissonRun) float64 { return ms(p.p99) }), higherWorse),
				spread("%.0f", each(ps, func(p poissonRun) float64 { return float64(p.throttled) }), higherWorse),
				spread("%.0f", each(ps, func(p poissonRun) float64 { return float64(p.errors) }), higherWorse))
		}
	}
	t.Log("\n" + md.String())
	if *jobsMD != "" {
		if err := os.WriteFile(*jobsMD, []byte(md.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// belowQuotaHeader opens BELOW_QUOTA.md.
const belowQuotaHeader = `# Below the quota: what a client far from its limit feels

Generated by ` + "`cd bench && go test ./adapt -run TestBelowQuota -args -jobs.md $PWD/BELOW_QUOTA.md`" + `
(virtual time, testing/synctest, against the in-memory internal/apisim server; do not edit by hand).
The same test holds pacer to issue 11's targets on every run: a job within the remaining quota within
1.25× its unpaced time besides the first look (the first request to an endpoint nobody knows goes alone,
issue 24: one round trip, once per endpoint per process, which shows as 2.00× on a job of one round and
1.33× on one of three, and within 1.25× from four rounds on), a quota-bound job within 1.10× of the fastest 429-free schedule, no caller
error and no 429 after the first response; p99 added delay at most 100 ms at Poisson loads up to half
the quota. The saturated regime is in [RESULTS.md](RESULTS.md).

`

type poissonRun struct {
	p50, p99          time.Duration
	throttled, errors int
}

// runPoisson sends requests at Poisson arrivals of load × the quota's rate
// for three windows and measures each one's added delay; seed picks the
// arrivals.
func runPoisson(t *testing.T, kind clientKind, load float64, seed uint64) poissonRun {
	var p poissonRun
	synctest.Test(t, func(t *testing.T) {
		const limit, window = 600, time.Minute
		srv := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: limit, Window: window, Latency: jobLatency})
		client, err := newClient(kind, srv.Transport(), scenario{Quota: limit, Window: window})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7+seed, uint64(load*100)))
		rate := load * limit / window.Seconds()
		end := time.Now().Add(3 * window)
		var mu sync.Mutex
		var added []time.Duration
		var errs atomic.Int64
		var wg sync.WaitGroup
		for time.Now().Before(end) {
			time.Sleep(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*window)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/x", nil)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					errs.Add(1)
					return
				}
				resp.Body.Close()
				mu.Lock()
				added = append(added, time.Since(start)-jobLatency)
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(added)
		if len(added) > 0 {
			p.p50 = added[len(added)/2]
			p.p99 = added[min(len(added)-1, len(added)*99/100)]
		}
		p.throttled = srv.Stats().Throttled
		p.errors = int(errs.Load())
		client.CloseIdleConnections()
	})
	return p
}
