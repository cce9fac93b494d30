package pacer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/work"
)

// lanesRun is a batch job and, beside it, an interactive caller, sharing one
// endpoint's quota through one Transport for a span of virtual time.
type lanesRun struct {
	server      apisim.Config
	span        time.Duration
	batch       int           // batch workers (0: none)
	interactive time.Duration // one interactive call this often (0: none)
	tokens      int           // each request's cost in tokens (0: none stated)
	unmarked    bool          // the batch job does not say it is one: the baseline
}

type lanesResult struct {
	batchOK, interactiveOK int
	refused                int             // interactive calls that failed
	delays                 []time.Duration // interactive calls' added delay over the server's latency; a refusal's is 10 min
	capacity               float64         // what the server admitted over the span, in requests
	late429                int             // 429s after the first response
}

func (r lanesResult) p(q float64) time.Duration {
	if len(r.delays) == 0 {
		return 0
	}
	d := slices.Clone(r.delays)
	slices.Sort(d)
	return d[min(int(q*float64(len(d))), len(d)-1)]
}

func (r lanesResult) String() string {
	return fmt.Sprintf("batch %d (%.3f of capacity), interactive %d (p50 %v, p99 %v, refused %d), late 429s %d",
		r.batchOK, float64(r.batchOK)/r.capacity, r.interactiveOK, r.p(0.5), r.p(0.99), r.refused, r.late429)
}

// runLanes runs l inside a synctest bubble; the caller is in one.
func runLanes(t *testing.T, l lanesRun) lanesResult {
	t.Helper()
	srv := apisim.New(l.server)
	tr := NewTransport(srv.Transport())
	client := &http.Client{Transport: tr}
	start := time.Now()
	end := start.Add(l.span)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	var mu sync.Mutex
	var res lanesResult
	get := func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/thing", nil)
		require.NoError(t, err)
		if l.tokens > 0 {
			req.Header.Set("X-Apisim-Tokens", strconv.Itoa(l.tokens))
			req = req.WithContext(work.WithCost(ctx, float64(l.tokens)))
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var wg sync.WaitGroup
	bctx := work.WithClass(ctx, work.Batch)
	if l.unmarked {
		bctx = ctx
	}
	for range l.batch {
		wg.Go(func() {
			for bctx.Err() == nil {
				status, err := get(bctx)
				var rle *RateLimitError
				switch {
				case err == nil && status == http.StatusOK:
					mu.Lock()
					res.batchOK++
					mu.Unlock()
				case errors.As(err, &rle):
					// Refused at once: the quota comes back at RetryAt.
					time.Sleep(min(time.Until(rle.RetryAt), time.Until(end)))
				}
			}
		})
	}
	if l.interactive > 0 {
		wg.Go(func() {
			for next := start.Add(l.interactive / 3); next.Before(end); next = next.Add(l.interactive) {
				time.Sleep(time.Until(next))
				// A caller that waits at most ten minutes for its answer.
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Minute)
				began := time.Now()
				status, err := get(cctx)
				took := time.Since(began) - l.server.Latency
				ccancel()
				if errors.Is(err, context.DeadlineExceeded) && !time.Now().Before(end) {
					return // the run ended, not the call's patience
				}
				mu.Lock()
				if err == nil && status == http.StatusOK {
					res.interactiveOK++
					res.delays = append(res.delays, took)
				} else {
					// A refusal is the longest delay there is: the
					// caller's patience, spent.
					res.refused++
					res.delays = append(res.delays, 10*time.Minute)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.capacity = srv.Capacity(start, end)
	if l.tokens > 0 {
		res.capacity = min(res.capacity, srv.TokenCapacity(start, end)/float64(l.tokens))
	}
	res.late429 = lateThrottles(srv, start, l.server.Latency)
	return res
}

// The case: a 16-worker batch job and an interactive caller (one
// call every 30 s) share a 5,000-per-hour quota. Without classes the batch
// spent the hour in seconds and the interactive caller waited out the hour.
func TestBatchLeavesInteractiveWorkItsReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := lanesRun{
			server:      apisim.Config{Style: apisim.StyleGitHub, Limit: 5000, Window: time.Hour, Latency: 50 * time.Millisecond},
			span:        2 * time.Hour,
			batch:       16,
			interactive: 30 * time.Second,
		}
		r := runLanes(t, l)
		t.Log(r)
		l.unmarked = true
		base := runLanes(t, l)
		t.Logf("the job unmarked: %v", base)
		assert.Less(t, base.interactiveOK, r.interactiveOK, "unmarked, the job starves the interactive caller")
		assert.Zero(t, r.refused, "interactive calls refused")
		assert.LessOrEqual(t, r.p(0.99), time.Second, "interactive added delay p99")
		assert.GreaterOrEqual(t, float64(r.batchOK)/r.capacity, 0.8, "batch's share of two windows")
		assert.Zero(t, r.late429, "429s after the first response")
	})
}

// A reserve nobody uses is given back: batch alone spends all but the floor.
func TestBatchAloneSpendsAllButTheFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := runLanes(t, lanesRun{
			server: apisim.Config{Style: apisim.StyleGitHub, Limit: 5000, Window: time.Hour, Latency: 50 * time.Millisecond},
			span:   2 * time.Hour,
			batch:  16,
		})
		t.Log(r)
		assert.GreaterOrEqual(t, float64(r.batchOK)/r.capacity, 0.95, "batch's share with no interactive caller")
		assert.Zero(t, r.late429, "429s after the first response")
	})
}

// Where the server itself refuses now and then (a Retry-After-only server,
// whose window the limiter infers), the reserve still gives interactive
// work the first claim on what is left: it waits no longer, and is refused
// no more often, than when the batch job does not say it is one. (An LLM's
// token quota that refills as it goes is left out: with 200 ms round trips
// it meets a third of its requests with a 429 today, marked or not, and the
// waits are those 429s' pauses; see issue 27.)
func TestBatchReserveOnOtherQuotas(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server apisim.Config
		tokens int
	}{
		{"retry-after", apisim.Config{Style: apisim.StyleRetryAfter, Limit: 600, Window: time.Minute, Latency: 50 * time.Millisecond}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := lanesRun{server: tc.server, span: 20 * time.Minute, batch: 16, interactive: 30 * time.Second, tokens: tc.tokens}
				marked := runLanes(t, l)
				l.unmarked = true
				unmarked := runLanes(t, l)
				t.Logf("marked:   %v", marked)
				t.Logf("unmarked: %v", unmarked)
				assert.LessOrEqual(t, marked.refused, unmarked.refused, "interactive calls refused")
				assert.LessOrEqual(t, marked.p(0.5), unmarked.p(0.5), "interactive added delay p50")
				// The longest waits, marked or not, are the pauses the
				// server's own refusals state (Retry-After to the window's
				// end): no reserve shortens those; a second is their
				// rounding.
				assert.LessOrEqual(t, marked.p(0.99), unmarked.p(0.99)+time.Second, "interactive added delay p99")
				assert.GreaterOrEqual(t, float64(marked.batchOK)/marked.capacity, 0.8, "batch's share")
			})
		})
	}
}

func TestBatchReserveOptionsAreValidatedNamingTheField(t *testing.T) {
	assert.PanicsWithValue(t, "pacer: WithBatchReserve: work.Reserve.Share out of range: 1", func() { WithBatchReserve(work.Reserve{Share: 1}) })
	assert.PanicsWithValue(t, "pacer: WithBatchReserve: work.Reserve.Floor out of range: 0.5", func() { WithBatchReserve(work.Reserve{Share: 0.2, Floor: 0.5}) })
	assert.PanicsWithValue(t, "pacer: AdaptiveConfig.BatchReserve: work.Reserve.Idle out of range: -1s",
		func() { NewAdaptive(AdaptiveConfig{BatchReserve: work.Reserve{Idle: -time.Second}}) })
	a := NewAdaptive(AdaptiveConfig{BatchReserve: work.Reserve{Share: 0.3, Floor: -1}})
	assert.Equal(t, work.Reserve{Share: 0.3, Floor: 0, Idle: time.Minute}, a.lanes.reserve, "defaults fill in; a negative floor is none")
}
