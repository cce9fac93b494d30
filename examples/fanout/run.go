package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
)

// config is one demo run.
type config struct {
	Style       apisim.Style
	Algorithm   apisim.Algorithm // "" = apisim's default for Style
	Quota       int              // requests per Window
	Window      time.Duration
	N           int // requests to fan out
	Concurrency int
	Safety      float64
	Latency     time.Duration
	Unseen      float64
	Client      string // clientPacer or clientPlain
	Compare     bool   // run both clients, then print them side by side
}

func (c config) validate() error {
	valid := false
	for _, s := range apisim.Styles() {
		valid = valid || c.Style == s
	}
	switch {
	case !valid:
		return fmt.Errorf("-style %q: want one of %v", c.Style, apisim.Styles())
	case c.Algorithm != "" && c.Algorithm != apisim.FixedWindow && c.Algorithm != apisim.SlidingWindow && c.Algorithm != apisim.TokenBucket:
		return fmt.Errorf("-algorithm %q: want fixed-window, sliding-window or token-bucket", c.Algorithm)
	case c.Quota <= 0:
		return fmt.Errorf("-quota %d: must be > 0", c.Quota)
	case c.Window <= 0:
		return fmt.Errorf("-window %v: must be > 0", c.Window)
	case c.N <= 0:
		return fmt.Errorf("-n %d: must be > 0", c.N)
	case c.Concurrency <= 0:
		return fmt.Errorf("-concurrency %d: must be > 0", c.Concurrency)
	case !(c.Safety > 0 && c.Safety <= 1):
		return fmt.Errorf("-safety %v: must be in (0, 1]", c.Safety)
	case c.Latency < 0:
		return fmt.Errorf("-latency %v: must be ≥ 0", c.Latency)
	case !(c.Unseen >= 0 && c.Unseen < 1):
		return fmt.Errorf("-unseen %v: must be in [0, 1)", c.Unseen)
	case c.Client != clientPacer && c.Client != clientPlain:
		return fmt.Errorf("-client %q: want %q or %q", c.Client, clientPacer, clientPlain)
	}
	return nil
}

// result is what a run measured, from both sides.
type result struct {
	Elapsed time.Duration // first request sent to last response read

	// Caller's side: every request ends in exactly one of these.
	Succeeded int   // 2xx responses
	Rejected  int   // non-2xx responses handed back (429s the client gave up on)
	Errors    int   // no response at all
	FirstErr  error // the first of Errors, for the summary
	Retries   int64 // attempts the Transport repeated after a 429

	// Server's side.
	Server              apisim.Stats
	ThrottledAfterFirst int // 429s to requests the server admitted after the client had its first response
	// Allowed is how many requests the quota allowed during the run: the
	// server's Capacity (the long-run rate), plus the bucket's initial burst
	// for a token bucket, which starts full.
	Allowed float64

	Endpoints []pacer.Stats // the Transport's per-endpoint limiters at the end; nil for the plain client
}

// Goodput is the successful requests per second of the run, as a fraction of
// the quota's rate.
func (r result) Goodput() float64 {
	if r.Allowed <= 0 {
		return 0
	}
	return float64(r.Server.OK) / r.Allowed
}

// run serves the simulated API on loopback, fans cfg.N requests out to it,
// reporting progress to out, and prints the summary. ctx cancels the job.
func run(ctx context.Context, cfg config, out io.Writer, tty bool) (result, error) {
	sim := apisim.New(apisim.Config{
		Style:       cfg.Style,
		Algorithm:   cfg.Algorithm,
		Limit:       cfg.Quota,
		Window:      cfg.Window,
		UnseenShare: cfg.Unseen,
		Latency:     cfg.Latency,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	defer func() {
		srv.Close()
		<-served
	}()
	baseURL := "http://" + ln.Addr().String()

	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.Concurrency // else connections beyond 2 are redialled per request
	defer base.CloseIdleConnections()
	wire := &wireTap{base: base}
	client := &http.Client{Transport: wire}
	var tr *pacer.Transport
	if cfg.Client == clientPacer {
		tr = pacer.NewTransport(wire, pacer.WithSafetyFactor(cfg.Safety))
		client.Transport = tr
	}
	ex := pacer.NewExecutor(client, pacer.WithMaxConcurrency(cfg.Concurrency))

	reqs := make([]*http.Request, cfg.N)
	for i := range reqs {
		reqs[i], err = http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/repos/pacer-go/pacer/issues/%d", baseURL, i+1), nil)
		if err != nil {
			return result{}, err
		}
	}

	printIntro(out, cfg, ln.Addr().String())
	sim.Reset() // windows start with the job
	prog := &progress{
		out:   out,
		tty:   tty,
		total: cfg.N,
		sample: func() sample {
			// DoAll yields results in input order; the executor counts them
			// as they finish, which is what the bar should follow.
			es := ex.Stats()
			return sample{done: int(es.Done + es.Failed), throttled: sim.Stats().Throttled, limit: limitOf(tr)}
		},
	}
	start := time.Now()
	stopProgress := prog.start(start)

	var res result
	for _, r := range ex.DoAll(ctx, reqs) {
		switch {
		case r.Err != nil:
			res.Errors++
			if res.FirstErr == nil {
				res.FirstErr = r.Err
			}
		case r.Response.StatusCode/100 == 2:
			res.Succeeded++
		default:
			res.Rejected++
		}
		if r.Response != nil {
			_, _ = io.Copy(io.Discard, r.Response.Body)
			r.Response.Body.Close()
		}
	}
	end := time.Now()
	stopProgress()
	// Every body is closed, so nothing is left to wait for; the deadline only
	// guards against a bug turning the demo into a hang.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ex.Shutdown(shutdownCtx); err != nil {
		return res, err
	}

	res.Elapsed = end.Sub(start)
	res.Server = sim.Stats()
	res.Allowed = sim.Capacity(start, end)
	if algorithmOf(cfg) == apisim.TokenBucket {
		res.Allowed += float64(cfg.Quota) * (1 - cfg.Unseen)
	}
	if first, ok := wire.firstResponse(); ok {
		for _, ev := range sim.Events() {
			if ev.Status == http.StatusTooManyRequests && ev.At.After(first) {
				res.ThrottledAfterFirst++
			}
		}
	}
	if tr != nil {
		res.Endpoints = tr.Stats()
		for _, ep := range res.Endpoints {
			res.Retries += ep.Retries
		}
	}
	printSummary(out, cfg, res)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// wireTap is the base transport under pacer: it records when the client got
// its first response, to tell the 429s nothing could have prevented (sent
// before anything was known about the server) from the rest.
type wireTap struct {
	base  http.RoundTripper
	once  sync.Once
	first atomic.Pointer[time.Time]
}

func (w *wireTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(req)
	if err == nil {
		w.once.Do(func() {
			now := time.Now()
			w.first.Store(&now)
		})
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

// limitOf describes the pacing of the (single) endpoint for the progress line.
func limitOf(tr *pacer.Transport) string {
	if tr == nil {
		return "no limiter"
	}
	eps := tr.Stats()
	if len(eps) == 0 {
		return "limit: learning"
	}
	// Requests may move from the host's limiter to one the server named
	// (X-RateLimit-Resource, X-RateLimit-Bucket): show the busiest.
	ep := eps[0]
	for _, e := range eps[1:] {
		if e.Requests > ep.Requests {
			ep = e
		}
	}
	if wait := time.Until(ep.PausedUntil); wait > 0 {
		return fmt.Sprintf("quota spent, next in %.1fs (%s)", wait.Seconds(), ep.Mode)
	}
	return fmt.Sprintf("limit %s (%s)", formatLimit(ep.Limit), ep.Mode)
}

func formatLimit(l pacer.Limit) string {
	if l == pacer.Inf {
		return "none, the quota affords it"
	}
	return fmt.Sprintf("%.1f/s", float64(l))
}

// errorsIsRateLimit reports whether err is pacer's fail-fast refusal.
func errorsIsRateLimit(err error) bool {
	var rle *pacer.RateLimitError
	return errors.As(err, &rle)
}
