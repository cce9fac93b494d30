package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

// scenario is the workload every client faces: the same simulated API and
// the same closed loop of workers, for the same time.
type scenario struct {
	Algorithm apisim.Algorithm // "" = apisim's default for the style
	Quota     int              // requests per Window
	Window    time.Duration    // the API's quota window
	Duration  time.Duration    // how long the workers loop
	Workers   int
	Latency   time.Duration // the API's service time per request
	Bin       time.Duration // width of the plot's time bins
}

// quotaRate is the quota in requests per second.
func (s scenario) quotaRate() float64 { return float64(s.Quota) / s.Window.Seconds() }

// algorithm is how the API of the given style counts requests.
func (s scenario) algorithm(style apisim.Style) apisim.Algorithm {
	switch {
	case s.Algorithm != "":
		return s.Algorithm
	case style == apisim.StyleShopify:
		return apisim.TokenBucket
	}
	return apisim.FixedWindow
}

// outcome is what one (style, client) run measured.
type outcome struct {
	Style  apisim.Style
	Client string

	// Server side, for requests admitted during the run.
	OK, Throttled int
	// ThrottledAfterFirst counts 429s to requests the server admitted after
	// the client had received its first response: the ones a client that
	// learns from responses could have avoided.
	ThrottledAfterFirst int
	// Allowed is how many requests the quota allowed during the run: the
	// server's Capacity (the long-run rate over the run), plus, for a token
	// bucket, the initial burst (the bucket starts full). With fixed windows
	// aligned on the run it is exactly Windows × Quota.
	Allowed float64

	// Caller side: every call ends in exactly one of Succeeded, Failed, CutOff.
	Calls     int
	Succeeded int // a 2xx response
	Failed    int // an error or a non-2xx response: what the caller must handle
	CutOff    int // still waiting or in flight when the run ended
	// Added latency: the caller's whole call minus the wire time of the
	// attempt whose response it got, i.e. time spent in limiter waits,
	// backoffs and failed attempts. Calls cut off at the end count with what
	// they had waited so far (a lower bound).
	AddedP50, AddedP99 time.Duration

	// Per plot bin, from the start of the run: requests the server admitted
	// (OK) and answered 429.
	OKBins, ThrottledBins []int
}

// Goodput is the successful requests as a fraction of what the quota allowed.
func (o outcome) Goodput() float64 {
	if o.Allowed <= 0 {
		return 0
	}
	return float64(o.OK) / o.Allowed
}

// runOne serves a fresh simulated API of the given style on loopback and runs
// the workload against it with a fresh client of the given kind.
func runOne(ctx context.Context, sc scenario, style apisim.Style, kind clientKind) (outcome, error) {
	algo := sc.algorithm(style)
	sim := apisim.New(apisim.Config{Style: style, Algorithm: algo, Limit: sc.Quota, Window: sc.Window, Latency: sc.Latency})
	srv := httptest.NewServer(sim)
	defer srv.Close()

	base := &http.Transport{
		MaxIdleConns:        sc.Workers,
		MaxIdleConnsPerHost: sc.Workers, // every worker keeps its connection
		IdleConnTimeout:     30 * time.Second,
	}
	defer base.CloseIdleConnections()
	wire := &wireTap{base: base}
	client, err := newClient(kind, wire, sc)
	if err != nil {
		return outcome{}, err
	}
	defer client.CloseIdleConnections()

	// The windows start now, with the workers, so the run spans exactly
	// Duration/Window of them whatever the set-up took.
	sim.Reset()
	start := time.Now()
	end := start.Add(sc.Duration)
	// Cancelled at the end rather than given a deadline: limiters that
	// refuse waits past a deadline at once (pacer, x/time/rate) would
	// otherwise spin out failures in the last moments of the run.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(sc.Duration, cancel)
	defer stop.Stop()

	calls := make([][]call, sc.Workers)
	var wg sync.WaitGroup
	for w := range sc.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			calls[w] = work(runCtx, client, fmt.Sprintf("%s/items/%d", srv.URL, w))
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return outcome{}, err
	}

	o := outcome{Style: style, Client: string(kind)}
	o.Allowed = sim.Capacity(start, end)
	if algo == apisim.TokenBucket {
		o.Allowed += float64(sc.Quota) // Burst 0 = Quota
	}
	bins := int((sc.Duration + sc.Bin - 1) / sc.Bin)
	o.OKBins, o.ThrottledBins = make([]int, bins), make([]int, bins)
	first, haveFirst := wire.firstResponse()
	for _, ev := range sim.Events() {
		if ev.At.Before(start) || !ev.At.Before(end) {
			continue
		}
		i := min(bins-1, int(ev.At.Sub(start)/sc.Bin))
		if ev.Status == http.StatusOK {
			o.OK++
			o.OKBins[i]++
			continue
		}
		o.Throttled++
		o.ThrottledBins[i]++
		if haveFirst && ev.At.After(first) {
			o.ThrottledAfterFirst++
		}
	}

	var added []time.Duration
	for _, cs := range calls {
		for _, c := range cs {
			o.Calls++
			switch {
			case c.cutOff:
				o.CutOff++
			case c.ok:
				o.Succeeded++
			default:
				o.Failed++
			}
			added = append(added, c.added)
		}
	}
	o.AddedP50, o.AddedP99 = percentile(added, 0.50), percentile(added, 0.99)
	return o, nil
}

// call is one caller-level request.
type call struct {
	ok     bool          // a 2xx response
	cutOff bool          // the run ended before it did
	added  time.Duration // see outcome.AddedP50
}

// work loops requests to url through client until ctx ends.
func work(ctx context.Context, client *http.Client, url string) []call {
	var out []call
	for ctx.Err() == nil {
		tr := &trace{}
		req, err := http.NewRequestWithContext(withTrace(ctx, tr), http.MethodGet, url, nil)
		if err != nil {
			panic(err) // the URL is ours
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		c := call{}
		if resp != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			c.ok = err == nil && resp.StatusCode/100 == 2
		}
		total := time.Since(t0)
		c.added = total
		if resp != nil {
			c.added = max(0, total-time.Duration(tr.wire.Load()))
		}
		c.cutOff = err != nil && ctx.Err() != nil
		out = append(out, c)
	}
	return out
}

// trace carries, in the request's context, the wire time of its latest
// attempt, recorded by wireTap below whatever client is under test.
type trace struct{ wire atomic.Int64 }

type traceKey struct{}

func withTrace(ctx context.Context, t *trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// wireTap is the base transport of every client: it times each attempt on
// the wire and records when the client got its first response.
type wireTap struct {
	base  http.RoundTripper
	first atomic.Pointer[time.Time]
}

func (w *wireTap) RoundTrip(req *http.Request) (*http.Response, error) {
	t0 := time.Now()
	resp, err := w.base.RoundTrip(req)
	now := time.Now()
	if t, ok := req.Context().Value(traceKey{}).(*trace); ok {
		t.wire.Store(int64(now.Sub(t0)))
	}
	if err == nil {
		w.first.CompareAndSwap(nil, &now)
	}
	return resp, err
}

func (w *wireTap) CloseIdleConnections() {
	if c, ok := w.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (w *wireTap) firstResponse() (time.Time, bool) {
	if t := w.first.Load(); t != nil {
		return *t, true
	}
	return time.Time{}, false
}

// percentile returns the q-quantile (nearest rank) of ds; 0 for none. It
// sorts ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
