package pacer

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/internal/cubic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// job is what a user below (or above) the quota runs: n requests from
// workers goroutines through a Transport, against a fixed-window apisim
// server whose window began offset ago and of whose quota spent requests
// were already used by someone else.
type job struct {
	style   apisim.Style
	algo    apisim.Algorithm // the style's own when zero
	limit   int
	window  time.Duration
	spent   int           // used before the job starts
	offset  time.Duration // the job starts this far into the server's window
	n       int
	workers int
	latency time.Duration
}

// jobResult is what the job's user feels.
type jobResult struct {
	elapsed      time.Duration
	unpaced      time.Duration // the same job with no limiter and no quota
	fastest      time.Duration // the fastest schedule that sends no 429
	callerErrors int
	late429      int // 429s for requests sent after the first response
	all429       int // every 429 the job's requests got
	maxAttempt   time.Duration
	first429     time.Duration // when the first late 429 was sent, from the start
}

func (r jobResult) String() string {
	return fmt.Sprintf("elapsed=%v unpaced=%v (%.2f×) fastest=%v (%.2f×) errors=%d late429=%d first429=%v",
		r.elapsed, r.unpaced, r.elapsed.Seconds()/r.unpaced.Seconds(), r.fastest,
		r.elapsed.Seconds()/r.fastest.Seconds(), r.callerErrors, r.late429, r.first429)
}

// unpaced is the job's time with no limiter against a server with no quota:
// rounds of workers requests, one latency each.
func (j job) unpaced() time.Duration {
	rounds := (j.n + j.workers - 1) / j.workers
	return time.Duration(rounds) * j.latency
}

// fastest is the 429-free lower bound for a fixed window: what is left of
// the current window goes at once, each later window's limit at its start;
// within a window, rounds of workers requests take a latency each.
func (j job) fastest() time.Duration {
	left := j.limit - j.spent
	if j.n <= left {
		return j.unpaced()
	}
	rest := j.n - left
	windows := (rest + j.limit - 1) / j.limit
	last := rest - (windows-1)*j.limit
	// The spending before the job is sequential, one latency each.
	untilReset := j.window - j.offset - time.Duration(j.spent)*j.latency
	lastRounds := (last + j.workers - 1) / j.workers
	return untilReset + time.Duration(windows-1)*j.window + time.Duration(lastRounds)*j.latency
}

func (j job) run(t *testing.T, opts ...Option) jobResult {
	t.Helper()
	var r jobResult
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(apisim.Config{Style: j.style, Algorithm: j.algo, Limit: j.limit, Window: j.window, Latency: j.latency})
		rt := srv.Transport()
		time.Sleep(j.offset)
		for range j.spent {
			req, _ := http.NewRequest(http.MethodGet, "http://other.test/v1/thing", nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		before := len(srv.Events())
		tr := NewTransport(rt, opts...)
		client := &http.Client{Transport: tr}
		ctx, cancel := context.WithTimeout(context.Background(), max(3*time.Hour, 2*j.fastest()))
		defer cancel()
		var next atomic.Int64
		var errs atomic.Int64
		var worst atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range j.workers {
			wg.Go(func() {
				for next.Add(1) <= int64(j.n) {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/thing", nil)
					t0 := time.Now()
					resp, err := client.Do(req)
					if d := int64(time.Since(t0)); d > worst.Load() {
						worst.Store(d)
					}
					if err != nil {
						errs.Add(1)
						if errs.Load() == 1 {
							t.Logf("first caller error: %v", err)
						}
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
		events := srv.Events()[before:]
		if len(events) > 0 {
			first := events[0].At.Add(j.latency)
			for _, e := range events {
				if e.Status == http.StatusTooManyRequests {
					r.all429++
				}
				if e.Status == http.StatusTooManyRequests && !e.At.Before(first) {
					if r.late429 == 0 {
						r.first429 = e.At.Sub(start)
					}
					r.late429++
				}
			}
		}
		r.callerErrors = int(errs.Load())
		r.maxAttempt = time.Duration(worst.Load())
		tr.CloseIdleConnections()
	})
	r.unpaced, r.fastest = j.unpaced(), j.fastest()
	return r
}

// TestJobWithinTheRemainingQuotaRunsAsFastAsWithoutALimiter is the regime
// most traffic lives in: a job that the quota affords must not wait for
// pacing, whatever the window's length, the style of the headers, or how
// much of the quota is already gone.
func TestJobWithinTheRemainingQuotaRunsAsFastAsWithoutALimiter(t *testing.T) {
	const lat = 50 * time.Millisecond
	jobs := []job{
		{style: apisim.StyleGitHub, limit: 5000, window: time.Hour, n: 500},
		{style: apisim.StyleGitHub, limit: 5000, window: time.Hour, spent: 1000, n: 100},
		{style: apisim.StyleGitHub, limit: 5000, window: time.Hour, spent: 1000, n: 4000},
		{style: apisim.StyleGitHub, limit: 10000, window: 24 * time.Hour, spent: 2000, n: 300},
		{style: apisim.StyleGitHub, limit: 5000, window: time.Minute, n: 200},
		{style: apisim.StyleGitHub, limit: 600, window: time.Minute, spent: 120, n: 480},
		{style: apisim.StyleIETF, limit: 600, window: time.Minute, n: 120},
		{style: apisim.StyleIETF, limit: 10000, window: 24 * time.Hour, spent: 500, n: 9500},
		{style: apisim.StyleOpenAI, limit: 500, window: time.Minute, n: 500},
		{style: apisim.StyleOpenAI, limit: 3000, window: time.Hour, spent: 100, n: 60},
		{style: apisim.StyleAnthropic, limit: 1000, window: time.Minute, spent: 200, n: 800},
		// Quotas that refill as they go: what the bucket holds is there to
		// take; only its refill is paced.
		{style: apisim.StyleOpenAI, algo: apisim.TokenBucket, limit: 600, window: time.Minute, spent: 120, n: 240},
		{style: apisim.StyleOpenAI, algo: apisim.TokenBucket, limit: 5000, window: time.Hour, spent: 1000, n: 1200},
		{style: apisim.StyleAnthropic, algo: apisim.TokenBucket, limit: 1000, window: time.Minute, spent: 200, n: 600},
		// A bucket that refills a unit a second, from a few workers: its
		// time to full is read from the second answer (1.69× before).
		{style: apisim.StyleOpenAI, algo: apisim.TokenBucket, limit: 60, window: time.Minute, n: 39, workers: 4},
		{style: apisim.StyleDiscord, algo: apisim.TokenBucket, limit: 60, window: time.Minute, n: 37, workers: 4},
		// Shopify's REST bucket (40, leaking 2 a second) and Plus's (80,
		// 4 a second), a few workers as its docs advise.
		{style: apisim.StyleShopify, limit: 40, window: 20 * time.Second, spent: 8, n: 30, workers: 4},
		{style: apisim.StyleShopify, limit: 80, window: 20 * time.Second, spent: 10, n: 60, workers: 4},
		{style: apisim.StyleIETF, algo: apisim.SlidingWindow, limit: 600, window: time.Minute, spent: 120, n: 240},
		{style: apisim.StyleGitHub, algo: apisim.SlidingWindow, limit: 5000, window: time.Hour, spent: 1000, n: 1200},
	}
	for _, j := range jobs {
		j.latency = lat
		if j.workers == 0 {
			j.workers = 16
		}
		name := fmt.Sprintf("%s/%d-per-%v/spent=%d/n=%d", j.style, j.limit, j.window, j.spent, j.n)
		if j.algo != "" {
			name = fmt.Sprintf("%s/%s/%d-per-%v/spent=%d/n=%d", j.style, j.algo, j.limit, j.window, j.spent, j.n)
		}
		t.Run(name, func(t *testing.T) {
			r := j.run(t)
			t.Log(r)
			assert.LessOrEqual(t, r.elapsed.Seconds(), 1.25*r.unpaced.Seconds(), "job time ÷ unpaced time")
			assert.Zero(t, r.callerErrors, "caller errors")
			assert.Zero(t, r.late429, "429s after the first response")
		})
	}
}

// TestQuotaBoundJobFollowsTheFastest429FreeSchedule: a job larger than the
// quota spends what is left now and each window's quota as it opens, with
// no 429 and no request refused.
func TestQuotaBoundJobFollowsTheFastest429FreeSchedule(t *testing.T) {
	const lat = 50 * time.Millisecond
	jobs := []job{
		{style: apisim.StyleGitHub, limit: 300, window: time.Minute, offset: 20 * time.Second, n: 1000},
		{style: apisim.StyleIETF, limit: 600, window: time.Minute, n: 1800},
		{style: apisim.StyleOpenAI, limit: 200, window: time.Minute, spent: 50, n: 600},
		{style: apisim.StyleGitHub, limit: 5000, window: time.Hour, spent: 4000, n: 3000},
		{style: apisim.StyleIETF, limit: 1000, window: 24 * time.Hour, spent: 900, n: 1500},
	}
	for _, j := range jobs {
		j.latency = lat
		if j.workers == 0 {
			j.workers = 16
		}
		name := fmt.Sprintf("%s/%d-per-%v/spent=%d/offset=%v/n=%d", j.style, j.limit, j.window, j.spent, j.offset, j.n)
		t.Run(name, func(t *testing.T) {
			r := j.run(t, WithMaxWait(48*time.Hour))
			t.Log(r)
			assert.LessOrEqual(t, r.elapsed.Seconds(), 1.10*r.fastest.Seconds(), "job time ÷ fastest 429-free schedule")
			assert.Zero(t, r.callerErrors, "caller errors")
			assert.Zero(t, r.late429, "429s after the first response")
		})
	}
}

// An endpoint that answers every request 429, with quota headers that say
// there is room and nothing that says until when: each call still returns
// within a bounded time, and the waits do not grow from call to call.
func TestPersistent429WithoutAResetIsLookedAtOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Time
		var mu sync.Mutex
		base := transportFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sent = append(sent, time.Now())
			mu.Unlock()
			h := http.Header{}
			h.Set("X-Ratelimit-Limit-Requests", "5000")
			h.Set("X-Ratelimit-Remaining-Requests", "4999")
			h.Set("X-Ratelimit-Reset-Requests", "12ms")
			return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: http.NoBody, Request: r}, nil
		})
		client := &http.Client{Transport: NewTransport(base)}
		var worst time.Duration
		for range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/chat", nil)
			start := time.Now()
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			worst = max(worst, time.Since(start))
			cancel()
		}
		t.Logf("worst call %v, %d requests sent", worst, len(sent))
		// Looks at most cubic.MaxLook apart, plus the probing floor's
		// spacing (MinLimit 0.5/s) and the retry's jitter: 10 s is ample.
		// Without the cap they doubled: 20 minutes apart after 8 refusals.
		const look = cubic.MaxLook + 10*time.Second
		for i := 1; i < len(sent); i++ {
			assert.LessOrEqual(t, sent[i].Sub(sent[i-1]), look, "looks at most a minute apart")
		}
		// A call is its first attempt and three retries.
		assert.LessOrEqual(t, worst, 5*look, "no call waits more than its attempts' capped looks")
	})
}

// A retry that would wait for a daily quota's reset is not made: the
// caller gets the 429 at once, and the next request is refused with the
// reset. No attempt waits past MaxDelay, retries included.
func TestRetryBehindADailyResetIsRefusedNotSleptOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := transportFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{}
			h.Set("RateLimit", `"daily";r=0;t=72000`)
			h.Set("RateLimit-Policy", `"daily";q=1000;w=86400`)
			return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: http.NoBody, Request: r}, nil
		})
		client := &http.Client{Transport: NewTransport(base)}
		start := time.Now()
		resp, err := client.Get("http://api.test/v1/x")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Zero(t, time.Since(start), "returned at once")
		_, err = client.Get("http://api.test/v1/x")
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		assert.Zero(t, time.Since(start), "refused at once")
		assert.WithinDuration(t, start.Add(20*time.Hour), rle.RetryAt, time.Second, "with the reset the daily window explains")
	})
}
