package main

import (
	"context"
	"errors"
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

// The sweep: a wide, seeded sample of scenarios beyond the fixed grids of
// the other tables (jobs_test.go, situations_test.go, fleet_test.go), each
// run several times (each its own goroutine ordering), the worst run of
// each held to the targets. In virtual time (testing/synctest) against the
// in-memory apisim server. It is off by default (minutes of CPU):
//
//	cd bench && go test ./adapt -run TestSweep -timeout 30m -args -sweep               # the whole sweep
//	cd bench && go test ./adapt -run TestSweep -args -sweep -sweep.only 'below/github/600/1m' -sweep.reps 10 -v
//
// Three families:
//
//   - below: a job within what the quota has left (5–90% of it), after
//     someone else spent 0, 20 or 60% of it, the job starting at a phase of
//     the window. Target: job time ≤ 1.25× the unpaced job (a plain client:
//     rounds of workers requests, one latency each) plus one round trip
//     (the first look), no 429 after the first response, no caller error.
//   - saturated: workers loop for sweepWindows windows, over fixed window,
//     sliding window and token bucket. Header styles: goodput ≥ 0.90 of
//     what the quota allowed, no 429 after the first response.
//     Retry-After-only and bare servers: goodput ≥ 0.85, ≤ 1% 429s.
//   - mess: saturated loops with the server's clock off (±1, ±3, ±10 s),
//     an unseen client spending 10–50% of the quota, jittered latency.
//     Target: no 429 after the first response, goodput ≥ 0.80 of what the
//     unseen client leaves.
var (
	sweepFlag  = flag.Bool("sweep", false, "run TestSweep, the wide seeded scenario sweep (minutes of CPU)")
	sweepReps  = flag.Int("sweep.reps", 3, "runs of each sweep scenario (big ones run fewer, at least 1)")
	sweepSeed  = flag.Uint64("sweep.seed", 1, "seed of the sweep's sample of scenarios")
	sweepCount = flag.String("sweep.n", "150,90,60", "scenarios sampled per family: below,saturated,mess")
	sweepOnly  = flag.String("sweep.only", "", "run only the sampled scenarios whose name contains this")
	sweepCase  = flag.String("sweep.case", "", "run this one scenario, by its name (as the sweep prints it), whatever the sample")
	sweepOut   = flag.String("sweep.out", "", "write every scenario's worst run as tab-separated values to this file")
	sweepDump  = flag.String("sweep.dump", "", "with -sweep.trace: also log every response sent in this span of the run, as \"from,to\" (\"60s,2m\")")
	sweepTrace = flag.Duration("sweep.trace", 0, "with -sweep.case: log every run's responses in bins this wide, and the headers around each late 429")
)

// sweepWindows is how many windows a saturated or mess run loops for.
const sweepWindows = 6

// sweepQuota is one quota of the sweep.
type sweepQuota struct {
	limit  int
	window time.Duration
}

var (
	sweepHeaderStyles = []apisim.Style{apisim.StyleGitHub, apisim.StyleIETF, apisim.StyleIETF07, apisim.StyleOpenAI,
		apisim.StyleAnthropic, apisim.StyleDiscord, apisim.StyleShopify}
	sweepQuotas = []sweepQuota{{60, time.Minute}, {600, time.Minute}, {100, 10 * time.Second}, {5000, time.Hour}, {1000, 24 * time.Hour}}
	sweepAlgos  = []apisim.Algorithm{apisim.FixedWindow, apisim.SlidingWindow, apisim.TokenBucket}
	sweepLats   = []time.Duration{5 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond}
)

// sweepCaseT is one scenario. Its name (String) says every parameter and
// parses back (parseSweepCase), so a failing one can be rerun alone.
type sweepCaseT struct {
	family  string // "below", "saturated", "mess"
	style   apisim.Style
	algo    apisim.Algorithm
	limit   int
	window  time.Duration
	latency time.Duration
	workers int
	// below
	spent float64 // share of the limit someone else spent first
	job   float64 // the job's size, a share of what is left
	phase float64 // share of the window gone when the spending starts
	// mess
	skew   time.Duration // the server's clock minus the client's
	unseen float64       // apisim.Config.UnseenShare
	jitter time.Duration // extra latency, uniform in [0, jitter], half each way
}

func (c sweepCaseT) String() string {
	s := fmt.Sprintf("%s/%s/%s/%d/%s/lat=%s/w=%d", c.family, c.style, c.algo, c.limit, c.window, c.latency, c.workers)
	switch c.family {
	case "below":
		s += fmt.Sprintf("/spent=%g/job=%g/phase=%g", c.spent, c.job, c.phase)
	case "mess":
		s += fmt.Sprintf("/skew=%s/unseen=%g/jitter=%s", c.skew, c.unseen, c.jitter)
	}
	return s
}

// parseSweepCase parses a String.
func parseSweepCase(s string) (sweepCaseT, error) {
	var c sweepCaseT
	parts := strings.Split(s, "/")
	if len(parts) < 7 {
		return c, fmt.Errorf("sweep case %q: want family/style/algorithm/limit/window/lat=/w=[/...]", s)
	}
	c.family, c.style, c.algo = parts[0], apisim.Style(parts[1]), apisim.Algorithm(parts[2])
	var err error
	if _, err = fmt.Sscanf(parts[3], "%d", &c.limit); err != nil {
		return c, fmt.Errorf("sweep case %q: limit: %v", s, err)
	}
	if c.window, err = time.ParseDuration(parts[4]); err != nil {
		return c, fmt.Errorf("sweep case %q: window: %v", s, err)
	}
	for _, kv := range parts[5:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "lat":
			c.latency, err = time.ParseDuration(v)
		case "w":
			_, err = fmt.Sscanf(v, "%d", &c.workers)
		case "spent":
			_, err = fmt.Sscanf(v, "%g", &c.spent)
		case "job":
			_, err = fmt.Sscanf(v, "%g", &c.job)
		case "phase":
			_, err = fmt.Sscanf(v, "%g", &c.phase)
		case "skew":
			c.skew, err = time.ParseDuration(v)
		case "unseen":
			_, err = fmt.Sscanf(v, "%g", &c.unseen)
		case "jitter":
			c.jitter, err = time.ParseDuration(v)
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			return c, fmt.Errorf("sweep case %q: %s: %v", s, k, err)
		}
	}
	return c, nil
}

// sweepSample draws the families' scenarios, distinct, from the seed.
func sweepSample(seed uint64, nBelow, nSat, nMess int) []sweepCaseT {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	pick := func(n int) int { return rng.IntN(n) }
	seen := map[string]bool{}
	var out []sweepCaseT
	add := func(n int, draw func() sweepCaseT) {
		for tries := 0; n > 0 && tries < 100*n; tries++ {
			c := draw()
			if seen[c.String()] {
				continue
			}
			seen[c.String()] = true
			out = append(out, c)
			n--
		}
	}
	add(nBelow, func() sweepCaseT {
		q := sweepQuotas[pick(len(sweepQuotas))]
		style := sweepHeaderStyles[pick(len(sweepHeaderStyles))]
		// Every way of counting, as for the saturated: OpenAI's and
		// Anthropic's own are token buckets, where a job below the quota
		// was once 72× unpaced while every fixed window ran at 1.0×.
		algo := sweepAlgos[pick(3)]
		if style == apisim.StyleShopify {
			algo = apisim.TokenBucket // its header has no other reading
		}
		return sweepCaseT{family: "below", style: style, algo: algo, limit: q.limit, window: q.window,
			latency: sweepLats[pick(3)], workers: []int{1, 4, 16, 64}[pick(4)],
			spent: []float64{0, 0.2, 0.6}[pick(3)],
			job:   math.Round(100*(0.05+0.85*rng.Float64())) / 100,
			phase: []float64{0, 0, 0.5, 0.9}[pick(4)]}
	})
	allStyles := append(slices.Clone(sweepHeaderStyles), apisim.StyleRetryAfter, apisim.StyleBare)
	add(nSat, func() sweepCaseT {
		q := sweepQuotas[pick(len(sweepQuotas))]
		return sweepCaseT{family: "saturated", style: allStyles[pick(len(allStyles))], algo: sweepAlgos[pick(3)],
			limit: q.limit, window: q.window, latency: sweepLats[pick(3)], workers: []int{4, 32, 128}[pick(3)]}
	})
	add(nMess, func() sweepCaseT {
		q := sweepQuotas[pick(len(sweepQuotas))]
		c := sweepCaseT{family: "mess", style: sweepHeaderStyles[pick(len(sweepHeaderStyles))], algo: sweepAlgos[pick(3)],
			limit: q.limit, window: q.window, latency: sweepLats[pick(3)], workers: []int{4, 32, 128}[pick(3)]}
		for c.skew == 0 && c.unseen == 0 && c.jitter == 0 {
			c.skew = []time.Duration{0, time.Second, -time.Second, 3 * time.Second, -3 * time.Second, 10 * time.Second, -10 * time.Second}[pick(7)]
			c.unseen = []float64{0, 0.1, 0.3, 0.5}[pick(4)]
			c.jitter = []time.Duration{0, 0, 20 * time.Millisecond, 200 * time.Millisecond}[pick(4)]
		}
		return c
	})
	return out
}

// sweepRun is one run's outcome.
type sweepRun struct {
	// below
	elapsed, unpaced time.Duration
	n                int
	// saturated and mess
	ok, requests, throttled int
	allowed                 float64
	// all
	errors, late429s int
	cpu              time.Duration // wall time the run took (the machine's, not virtual)
}

// held is a below job's time besides the first look, ÷ unpaced.
func (r sweepRun) held(c sweepCaseT) float64 {
	return (r.elapsed - c.latency).Seconds() / r.unpaced.Seconds()
}
func (r sweepRun) goodput() float64  { return float64(r.ok) / r.allowed }
func (r sweepRun) share429() float64 { return float64(r.throttled) / float64(max(1, r.requests)) }
func (c sweepCaseT) headerStyle() bool {
	return c.style != apisim.StyleRetryAfter && c.style != apisim.StyleBare
}

// misses says which targets run r of c missed; empty when it met them all.
func (c sweepCaseT) misses(r sweepRun) []string {
	var out []string
	if r.errors > 0 && c.family == "below" { // a looping caller's errors are reported, not held
		out = append(out, fmt.Sprintf("%d caller errors (0)", r.errors))
	}
	switch {
	case c.family == "below":
		if h := r.held(c); h > 1.25 {
			out = append(out, fmt.Sprintf("job %.2f× unpaced besides the first look (≤ 1.25×; %v for %v unpaced, %d requests)", h, r.elapsed.Round(time.Millisecond), r.unpaced, r.n))
		}
		if r.late429s > 0 {
			out = append(out, fmt.Sprintf("%d 429s after the first response (0)", r.late429s))
		}
	case c.family == "mess" || c.headerStyle():
		want := 0.90
		if c.family == "mess" {
			want = 0.80
		}
		if g := r.goodput(); g < want {
			out = append(out, fmt.Sprintf("goodput %.3f (≥ %.2f; %d of %.0f)", g, want, r.ok, r.allowed))
		}
		if r.late429s > 0 {
			out = append(out, fmt.Sprintf("%d 429s after the first response (0)", r.late429s))
		}
	default:
		if g := r.goodput(); g < 0.85 {
			out = append(out, fmt.Sprintf("goodput %.3f (≥ 0.85; %d of %.0f)", g, r.ok, r.allowed))
		}
		if s := r.share429(); s > 0.01 {
			out = append(out, fmt.Sprintf("%.2f%% 429s (≤ 1%%; %d of %d)", 100*s, r.throttled, r.requests))
		}
	}
	return out
}

// reps is how many runs c gets: fewer for the ones of many requests.
func (c sweepCaseT) reps(want int) int {
	var requests float64
	switch c.family {
	case "below":
		requests = c.job * (1 - c.spent) * float64(c.limit)
	default:
		requests = sweepWindows * float64(c.limit)
		if c.style == apisim.StyleBare || c.style == apisim.StyleRetryAfter {
			requests *= 2
		}
	}
	switch {
	case requests > 20000:
		return max(1, want/3)
	case requests > 5000:
		return max(1, (want+1)/2)
	}
	return want
}

// sweepTap sits between pacer and the server: it counts, at the client,
// the responses to requests sent before end, and the 429s to requests sent
// once the first response had arrived.
type sweepTap struct {
	base      http.RoundTripper
	end       time.Time // zero: count everything
	first     atomic.Int64
	requests  atomic.Int64
	ok, t429  atomic.Int64
	late429s  atomic.Int64
	jitter    time.Duration
	mu        sync.Mutex
	jitterRng *rand.Rand
	trace     []traced // with -sweep.trace
}

// traced is one response, for -sweep.trace.
type traced struct {
	sent, back time.Time
	status     int
	late       bool
	headers    string
}

// rateHeaders is the rate-limit headers of h, on one line.
func rateHeaders(h http.Header) string {
	var out []string
	for k, v := range h {
		l := strings.ToLower(k)
		if strings.Contains(l, "ratelimit") || strings.Contains(l, "retry-after") || strings.Contains(l, "shopify") || l == "date" {
			out = append(out, k+": "+strings.Join(v, ","))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " | ")
}

// logTrace logs tap's responses in bins of width from start.
func (t *sweepTap) logTrace(tb testing.TB, start time.Time, width time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	slices.SortFunc(t.trace, func(a, b traced) int { return a.sent.Compare(b.sent) })
	var from, to time.Duration
	if f, tt, ok := strings.Cut(*sweepDump, ","); ok {
		from, _ = time.ParseDuration(f)
		to, _ = time.ParseDuration(tt)
	}
	for _, e := range t.trace {
		if at := e.sent.Sub(start); at >= from && at < to {
			tb.Logf("  sent %v back %v: %d %s", at, e.back.Sub(start), e.status, e.headers)
		}
	}
	type bin struct{ ok, t429, other int }
	var bins []bin
	for i, e := range t.trace {
		b := int(e.sent.Sub(start) / width)
		for len(bins) <= b {
			bins = append(bins, bin{})
		}
		switch e.status {
		case http.StatusOK:
			bins[b].ok++
		case http.StatusTooManyRequests:
			bins[b].t429++
		default:
			bins[b].other++
		}
		if e.late {
			for _, p := range t.trace[max(0, i-3) : i+1] {
				tb.Logf("  sent %v back %v: %d %s", p.sent.Sub(start), p.back.Sub(start), p.status, p.headers)
			}
		}
	}
	for i, b := range bins {
		tb.Logf("  [%v, %v): %d ok, %d 429, %d other", time.Duration(i)*width, time.Duration(i+1)*width, b.ok, b.t429, b.other)
	}
}

func (t *sweepTap) delay() time.Duration {
	if t.jitter <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Duration(t.jitterRng.Int64N(int64(t.jitter)/2 + 1))
}

func (t *sweepTap) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	if d := t.delay(); d > 0 { // on the way there
		time.Sleep(d)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if d := t.delay(); d > 0 { // on the way back
		time.Sleep(d)
	}
	t.first.CompareAndSwap(0, time.Now().UnixNano())
	if *sweepTrace > 0 {
		f := t.first.Load()
		t.mu.Lock()
		t.trace = append(t.trace, traced{sent: sent, back: time.Now(), status: resp.StatusCode, headers: rateHeaders(resp.Header),
			late: resp.StatusCode == http.StatusTooManyRequests && sent.UnixNano() >= f && (t.end.IsZero() || sent.Before(t.end))})
		t.mu.Unlock()
	}
	if !t.end.IsZero() && !sent.Before(t.end) {
		return resp, nil
	}
	t.requests.Add(1)
	switch resp.StatusCode {
	case http.StatusOK:
		t.ok.Add(1)
	case http.StatusTooManyRequests:
		t.t429.Add(1)
		if f := t.first.Load(); f != 0 && sent.UnixNano() >= f {
			t.late429s.Add(1)
		}
	}
	return resp, nil
}

// config is the server of c.
func (c sweepCaseT) config() apisim.Config {
	cfg := apisim.Config{Style: c.style, Algorithm: c.algo, Limit: c.limit, Window: c.window, Latency: c.latency, UnseenShare: c.unseen}
	if c.skew != 0 {
		skew := c.skew
		cfg.Now = func() time.Time { return time.Now().Add(skew) }
	}
	return cfg
}

// client is pacer with zero configuration but, as in jobs_test.go, a
// MaxWait of two windows on windows longer than its default (an hour).
func (c sweepCaseT) client(rt http.RoundTripper) *http.Client {
	if c.window > pacer.DefaultMaxDelay {
		return &http.Client{Transport: pacer.NewTransport(rt, pacer.WithMaxWait(2*c.window))}
	}
	return &http.Client{Transport: pacer.NewTransport(rt)}
}

// runSweepBelow runs c's job once.
func runSweepBelow(t *testing.T, c sweepCaseT) sweepRun {
	var r sweepRun
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(c.config())
		time.Sleep(time.Duration(c.phase * float64(c.window)))
		// Someone else's spending, all at once (it is admitted the instant
		// it is sent; its answers come one latency later).
		spent := int(math.Round(c.spent * float64(c.limit)))
		var wg sync.WaitGroup
		for range spent {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, "http://other.test/v1/x", nil)
				resp, err := srv.Transport().RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		r.n = max(1, int(math.Round(c.job*float64(c.limit-spent))))
		r.unpaced = time.Duration((r.n+c.workers-1)/c.workers) * c.latency
		tap := &sweepTap{base: srv.Transport()}
		client := c.client(tap)
		ctx, cancel := context.WithTimeout(context.Background(), 4*c.window)
		defer cancel()
		var next, errs atomic.Int64
		start := time.Now()
		for range c.workers {
			wg.Go(func() {
				for next.Add(1) <= int64(r.n) {
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
		r.late429s = int(tap.late429s.Load())
		client.CloseIdleConnections()
		if *sweepTrace > 0 {
			tap.logTrace(t, start, *sweepTrace)
		}
	})
	return r
}

// runSweepLoop runs c's workers in a loop for sweepWindows windows once.
func runSweepLoop(t *testing.T, c sweepCaseT) sweepRun {
	var r sweepRun
	synctest.Test(t, func(t *testing.T) {
		cfg := c.config()
		srv := apisim.New(cfg)
		span := time.Duration(sweepWindows) * c.window
		start := time.Now()
		end := start.Add(span)
		tap := &sweepTap{base: srv.Transport(), end: end, jitter: c.jitter, jitterRng: rand.New(rand.NewPCG(uint64(c.latency), 3))}
		client := c.client(tap)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var errs atomic.Int64
		var wg sync.WaitGroup
		for range c.workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/x", nil)
					resp, err := client.Do(req)
					if ctx.Err() != nil {
						if err == nil {
							resp.Body.Close()
						}
						return // cut off by the run's end
					}
					var rle *pacer.RateLimitError
					switch {
					case err == nil:
						if resp.StatusCode != http.StatusOK {
							errs.Add(1)
						}
						resp.Body.Close()
					case errors.As(err, &rle):
						errs.Add(1)
						time.Sleep(max(time.Second, min(time.Until(rle.RetryAt), time.Until(end))))
					default:
						errs.Add(1)
						time.Sleep(time.Second)
					}
				}
			})
		}
		time.Sleep(time.Until(end))
		cancel()
		wg.Wait()
		client.CloseIdleConnections()
		// What the quota allowed, less what the unseen client got through
		// (it is refused, and leaves more, when the visible one spends a
		// window early): the server's long-run rate over the run, in its
		// own clock, plus a token bucket's initial burst.
		serverStart := start.Add(c.skew)
		r.allowed = srv.Capacity(serverStart, serverStart.Add(span)) / (1 - c.unseen)
		if c.algo == apisim.TokenBucket { // the bucket starts full
			r.allowed += float64(c.limit)
		}
		r.allowed -= float64(srv.Stats().UnseenOK)
		// What the workers could do at all, one latency (and the mean
		// jitter) a request.
		rt := c.latency + c.jitter/2
		r.allowed = min(r.allowed, float64(c.workers)*float64(span)/float64(rt))
		r.ok, r.requests, r.throttled = int(tap.ok.Load()), int(tap.requests.Load()), int(tap.t429.Load())
		r.late429s = int(tap.late429s.Load())
		r.errors = int(errs.Load())
		if *sweepTrace > 0 {
			tap.logTrace(t, start, *sweepTrace)
			st := srv.Stats()
			t.Logf("  server: %d ok, %d throttled, unseen %d ok %d throttled; allowed %.0f", st.OK, st.Throttled, st.UnseenOK, st.UnseenThrottled, r.allowed)
		}
	})
	if c.family == "mess" || c.headerStyle() {
		// A 429 the caller sees is a caller error only where the target is
		// none at all; for the Retry-After and bare servers the share of
		// 429s is the figure.
		return r
	}
	r.errors = 0
	return r
}

// sweepResult is one scenario's runs.
type sweepResult struct {
	c      sweepCaseT
	runs   []sweepRun
	missed int      // runs that missed a target
	worst  []string // the misses of the worst run (the first of the most)
	worstI int
}

// TestSweep runs the sweep; see the top of this file.
func TestSweep(t *testing.T) {
	if !*sweepFlag && *sweepCase == "" {
		t.Skip("the sweep runs with -sweep (or -sweep.case NAME)")
	}
	var cases []sweepCaseT
	if *sweepCase != "" {
		c, err := parseSweepCase(*sweepCase)
		if err != nil {
			t.Fatal(err)
		}
		cases = []sweepCaseT{c}
	} else {
		var nb, ns, nm int
		if _, err := fmt.Sscanf(*sweepCount, "%d,%d,%d", &nb, &ns, &nm); err != nil {
			t.Fatalf("-sweep.n %q: want below,saturated,mess: %v", *sweepCount, err)
		}
		for _, c := range sweepSample(*sweepSeed, nb, ns, nm) {
			if strings.Contains(c.String(), *sweepOnly) {
				cases = append(cases, c)
			}
		}
	}
	results := make([]sweepResult, len(cases))
	began := time.Now()
	t.Run("cases", func(t *testing.T) {
		for i, c := range cases {
			t.Run(c.String(), func(t *testing.T) {
				t.Parallel()
				reps := c.reps(max(1, *sweepReps))
				if *sweepCase != "" {
					reps = max(1, *sweepReps)
				}
				res := sweepResult{c: c}
				most := 0
				for range reps {
					t0 := time.Now()
					var r sweepRun
					if c.family == "below" {
						r = runSweepBelow(t, c)
					} else {
						r = runSweepLoop(t, c)
					}
					r.cpu = time.Since(t0)
					res.runs = append(res.runs, r)
					if m := c.misses(r); len(m) > 0 {
						res.missed++
						if len(m) > most || res.worst == nil || c.worseRun(r, res.runs[res.worstI]) {
							most, res.worst, res.worstI = len(m), m, len(res.runs)-1
						}
					}
				}
				results[i] = res
				t.Logf("%s", res.line())
				if res.missed > 0 {
					t.Errorf("missed in %d of %d runs; worst: %s", res.missed, len(res.runs), strings.Join(res.worst, "; "))
				}
			})
		}
	})
	var fails []string
	var tsv strings.Builder
	tsv.WriteString("scenario\truns\tmissed\tworst\n")
	for _, res := range results {
		if res.runs == nil {
			continue
		}
		fmt.Fprintf(&tsv, "%s\t%d\t%d\t%s\n", res.c, len(res.runs), res.missed, res.summary())
		if res.missed > 0 {
			fails = append(fails, fmt.Sprintf("%s: missed in %d of %d runs: %s", res.c, res.missed, len(res.runs), strings.Join(res.worst, "; ")))
		}
	}
	t.Logf("swept %d scenarios in %v wall; %d missed a target in some run:\n%s", len(cases), time.Since(began).Round(time.Second), len(fails), strings.Join(fails, "\n"))
	if *sweepOut != "" {
		if err := os.WriteFile(*sweepOut, []byte(tsv.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// worseRun reports whether a is a worse run than b on c's headline figure.
func (c sweepCaseT) worseRun(a, b sweepRun) bool {
	if c.family == "below" {
		return a.late429s > b.late429s || a.held(c) > b.held(c)
	}
	return a.late429s > b.late429s || a.goodput() < b.goodput()
}

// summary is the worst of the runs' figures.
func (res sweepResult) summary() string {
	c, rs := res.c, res.runs
	errs := slices.Max(each(rs, func(r sweepRun) float64 { return float64(r.errors) }))
	late := slices.Max(each(rs, func(r sweepRun) float64 { return float64(r.late429s) }))
	cpu := slices.Max(each(rs, func(r sweepRun) float64 { return r.cpu.Seconds() }))
	if c.family == "below" {
		return fmt.Sprintf("n=%d held=%s late429=%.0f errors=%.0f cpu=%.1fs", rs[0].n,
			spread("%.2f×", each(rs, func(r sweepRun) float64 { return r.held(c) }), higherWorse), late, errs, cpu)
	}
	return fmt.Sprintf("goodput=%s 429s=%s late429=%.0f errors=%.0f cpu=%.1fs",
		spread("%.3f", each(rs, sweepRun.goodput), lowerWorse),
		spread("%.2f%%", each(rs, func(r sweepRun) float64 { return 100 * r.share429() }), higherWorse), late, errs, cpu)
}

func (res sweepResult) line() string {
	return fmt.Sprintf("%s: %d runs, %d missed: %s", res.c, len(res.runs), res.missed, res.summary())
}
