package pacer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/store"
	"github.com/pacer-go/pacer/work"
)

// fleetJob runs n requests on workers goroutines spread over the given
// round trippers (one per replica) and returns how long it took and how
// many 429s the server answered after its first response.
func fleetJob(t *testing.T, srv *apisim.Server, rts []http.RoundTripper, workers, n int) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for i := range workers {
		client := &http.Client{Transport: rts[i%len(rts)]}
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				req, err := http.NewRequest(http.MethodGet, "http://api.test/v1/thing", nil)
				require.NoError(t, err)
				resp, err := client.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return time.Since(start), lateThrottles(srv, start, 50*time.Millisecond)
}

// lateThrottles counts the 429s srv answered once the first response since
// since could have arrived, latency after the first request.
func lateThrottles(srv *apisim.Server, since time.Time, latency time.Duration) int {
	late := 0
	var first time.Time
	for _, e := range srv.Events() {
		if e.At.Before(since) {
			continue
		}
		if first.IsZero() {
			first = e.At.Add(latency)
		}
		if e.Status == http.StatusTooManyRequests && !e.At.Before(first) {
			late++
		}
	}
	return late
}

// spend takes n requests of srv's quota directly, as other work did before.
func spend(t *testing.T, srv *apisim.Server, n int) {
	t.Helper()
	rt := srv.Transport()
	for range n {
		req, err := http.NewRequest(http.MethodGet, "http://api.test/v1/thing", nil)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
}

// Replicas sharing a Store spend a job within the fleet's quota as one
// client does: at once. The case: 400 requests, a tenth of the
// 4,000 left on a 5,000-per-hour quota, took 256 times as long as unpaced
// on four replicas when every quota was spread over its window.
func TestReplicasRunAJobWithinTheQuotaAsFastAsUnpaced(t *testing.T) {
	for _, replicas := range []int{2, 4, 8} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := apisim.Config{Style: apisim.StyleGitHub, Limit: 5000, Window: time.Hour, Latency: 50 * time.Millisecond}
				plainSrv := apisim.New(cfg)
				spend(t, plainSrv, 1000)
				unpaced, _ := fleetJob(t, plainSrv, []http.RoundTripper{plainSrv.Transport()}, 16, 400)

				srv := apisim.New(cfg)
				spend(t, srv, 1000)
				mem := store.NewMemory()
				var rts []http.RoundTripper
				for range replicas {
					rts = append(rts, NewTransport(srv.Transport(), WithStore(mem)))
				}
				took, late := fleetJob(t, srv, rts, 16, 400)
				t.Logf("%d replicas: %v, unpaced %v: %.2fx, %d late 429s", replicas, took, unpaced, took.Seconds()/unpaced.Seconds(), late)
				assert.LessOrEqual(t, took.Seconds()/unpaced.Seconds(), 1.25, "job time / unpaced")
				assert.Zero(t, late, "429s after the first response")
			})
		})
	}
}

// A job larger than what is left runs to the 429-free bound: what is left
// now, then the next window's quota as it opens, across the fleet.
func TestReplicasRunAQuotaBoundJobAtTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := apisim.Config{Style: apisim.StyleGitHub, Limit: 600, Window: time.Minute, Latency: 50 * time.Millisecond}
		srv := apisim.New(cfg)
		mem := store.NewMemory()
		var rts []http.RoundTripper
		for range 4 {
			rts = append(rts, NewTransport(srv.Transport(), WithStore(mem)))
		}
		start := time.Now()
		took, late := fleetJob(t, srv, rts, 16, 1500)
		// 600 now, 600 at the first reset, the last 300 at the second.
		windowStart := start.Truncate(time.Minute)
		bound := windowStart.Add(2 * time.Minute).Sub(start)
		t.Logf("took %v, bound %v: %.3fx, %d late 429s", took, bound, took.Seconds()/bound.Seconds(), late)
		assert.LessOrEqual(t, took.Seconds()/bound.Seconds(), 1.10, "job time / 429-free bound")
		assert.Zero(t, late, "429s after the first response")
	})
}

// A saturated fleet spends the whole quota, with no 429 after the first
// response, and shares it fairly between its replicas.
func TestSaturatedFleetSpendsTheQuotaFairly(t *testing.T) {
	for _, replicas := range []int{4, 16} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := apisim.Config{Style: apisim.StyleGitHub, Limit: 600, Window: time.Minute, Latency: 50 * time.Millisecond}
				srv := apisim.New(cfg)
				mem := store.NewMemory()
				start := time.Now()
				end := start.Add(10 * time.Minute)
				ctx, cancel := context.WithDeadline(context.Background(), end)
				defer cancel()
				ok := make([]atomic.Int64, replicas)
				var wg sync.WaitGroup
				for r := range replicas {
					client := &http.Client{Transport: NewTransport(srv.Transport(), WithStore(mem))}
					for range 2 {
						wg.Go(func() {
							for ctx.Err() == nil {
								req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/thing", nil)
								resp, err := client.Do(req)
								if err != nil {
									if rle := (*RateLimitError)(nil); ctx.Err() == nil && errors.As(err, &rle) {
										time.Sleep(min(time.Until(rle.RetryAt), time.Until(end)))
									}
									continue
								}
								if resp.StatusCode == http.StatusOK {
									ok[r].Add(1)
								}
								resp.Body.Close()
							}
						})
					}
				}
				wg.Wait()
				oks, sum := make([]int64, replicas), 0.0
				for i := range ok {
					oks[i] = ok[i].Load()
					sum += float64(oks[i])
				}
				jain := jainIndex(oks)
				goodput := sum / srv.Capacity(start, end)
				late := lateThrottles(srv, start, cfg.Latency)
				t.Logf("%d replicas: goodput %.3f, Jain %.3f, %d late 429s", replicas, goodput, jain, late)
				assert.GreaterOrEqual(t, goodput, 0.97, "goodput / capacity")
				assert.GreaterOrEqual(t, jain, 0.9, "Jain fairness across replicas")
				assert.LessOrEqual(t, late, 0, "429s after the first response")
			})
		})
	}
}

// The reserve batch work leaves to interactive work holds across replicas:
// three replicas run a 16-worker batch job and a fourth makes one
// interactive call every 30 s, all on one 5,000-per-hour quota.
func TestFleetKeepsTheInteractiveReserveAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := apisim.Config{Style: apisim.StyleGitHub, Limit: 5000, Window: time.Hour, Latency: 50 * time.Millisecond}
		srv := apisim.New(cfg)
		mem := store.NewMemory()
		start := time.Now()
		end := start.Add(2 * time.Hour)
		ctx, cancel := context.WithDeadline(context.Background(), end)
		defer cancel()
		get := func(ctx context.Context, client *http.Client) (int, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/thing", nil)
			resp, err := client.Do(req)
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		var batchOK atomic.Int64
		var wg sync.WaitGroup
		bctx := work.WithClass(ctx, work.Batch)
		batchClients := make([]*http.Client, 3) // 16 workers on 3 replicas
		for i := range batchClients {
			batchClients[i] = &http.Client{Transport: NewTransport(srv.Transport(), WithStore(mem))}
		}
		for i := range 16 {
			client := batchClients[i%3]
			wg.Go(func() {
				for bctx.Err() == nil {
					status, err := get(bctx, client)
					var rle *RateLimitError
					switch {
					case err == nil && status == http.StatusOK:
						batchOK.Add(1)
					case errors.As(err, &rle):
						time.Sleep(min(time.Until(rle.RetryAt), time.Until(end)))
					}
				}
			})
		}
		interactive := &http.Client{Transport: NewTransport(srv.Transport(), WithStore(mem))}
		var delays []time.Duration
		refused := 0
		wg.Go(func() {
			for next := start.Add(10 * time.Second); next.Before(end); next = next.Add(30 * time.Second) {
				time.Sleep(time.Until(next))
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Minute)
				began := time.Now()
				status, err := get(cctx, interactive)
				ccancel()
				if err == nil && status == http.StatusOK {
					delays = append(delays, time.Since(began)-cfg.Latency)
				} else if time.Now().Before(end) {
					refused++
				}
			}
		})
		wg.Wait()
		slices.Sort(delays)
		p99 := delays[len(delays)*99/100]
		share := float64(batchOK.Load()) / srv.Capacity(start, end)
		late := lateThrottles(srv, start, cfg.Latency)
		t.Logf("4 replicas: interactive %d calls, p99 %v, refused %d; batch %.3f of capacity; %d late 429s", len(delays), p99, refused, share, late)
		assert.Zero(t, refused, "interactive calls refused")
		assert.LessOrEqual(t, p99, time.Second, "interactive added delay p99")
		assert.GreaterOrEqual(t, share, 0.8, "batch's share")
		assert.Zero(t, late, "429s after the first response")
	})
}

// budgetThenDown is a Memory whose budgets stop answering when down is set,
// as a store cut off from its member does.
type budgetThenDown struct {
	*store.Memory
	down atomic.Bool
}

func (s *budgetThenDown) Lease(ctx context.Context, key string, r store.LeaseRequest) (store.Lease, error) {
	if s.down.Load() {
		return store.Lease{}, errors.New("store unreachable")
	}
	return s.Memory.Lease(ctx, key, r)
}

// A member cut off from the store spends, until the window's reset, at most
// its share of the budget the store last told it: not the whole quota its
// own model sees.
func TestAMemberCutOffFromTheStoreSpendsItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := apisim.Config{Style: apisim.StyleGitHub, Limit: 100, Window: time.Minute, Latency: 50 * time.Millisecond}
		srv := apisim.New(cfg)
		st := &budgetThenDown{Memory: store.NewMemory()}
		a := &http.Client{Transport: NewTransport(srv.Transport(), WithStore(st))}
		b := &http.Client{Transport: NewTransport(srv.Transport(), WithStore(st))}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		get := func(c *http.Client) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/thing", nil)
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		for range 5 {
			require.NoError(t, get(a))
			require.NoError(t, get(b))
		}
		st.down.Store(true)
		sent := 0
		for get(a) == nil && sent < 200 {
			sent++
		}
		// About 90 were left for two members: a's share is about 45, and
		// what it had leased.
		t.Logf("cut off, a sent %d more before the reset", sent)
		assert.Less(t, sent, 60, "a member cut off spends about its share, not the whole quota")
		assert.Greater(t, sent, 30, "and does spend its share")
	})
}

// Interactive work that comes to a fleet in the middle of a batch job's
// burst raises the reserve at its first response, not at its second
// request: that member's first request goes before it knows any quota (and
// on GitHub, through the host's limiter, not the bucket's), so it leases
// nothing and told the store nothing. The batch job then spent the window
// down to the floor, and interactive work calling twice a minute ran dry
// 50 minutes into it (once in 25 runs of the reserve test above, sooner,
// and 27 calls were refused).
func TestFleetReserveHoldsFromTheFirstInteractiveResponse(t *testing.T) {
	for _, style := range []apisim.Style{apisim.StyleGitHub, apisim.StyleIETF} {
		t.Run(string(style), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := apisim.Config{Style: style, Limit: 5000, Window: time.Hour, Latency: 50 * time.Millisecond}
				srv := apisim.New(cfg)
				mem := store.NewMemory()
				end := time.Now().Add(time.Minute)
				ctx, cancel := context.WithDeadline(context.Background(), end)
				defer cancel()
				bctx := work.WithClass(ctx, work.Batch)
				var batchOK atomic.Int64
				var wg sync.WaitGroup
				for r := range 3 {
					client := &http.Client{Transport: NewTransport(srv.Transport(), WithStore(mem))}
					for range 5 + r%2 {
						wg.Go(func() {
							for bctx.Err() == nil {
								req, _ := http.NewRequestWithContext(bctx, http.MethodGet, "http://api.test/v1/thing", nil)
								resp, err := client.Do(req)
								var rle *RateLimitError
								switch {
								case err == nil:
									if resp.StatusCode == http.StatusOK {
										batchOK.Add(1)
									}
									resp.Body.Close()
								case errors.As(err, &rle):
									time.Sleep(min(time.Until(rle.RetryAt), time.Until(end)))
								}
							}
						})
					}
				}
				time.Sleep(2 * time.Second) // mid-burst: the job spends 5,000 in about 15 s
				interactive := &http.Client{Transport: NewTransport(srv.Transport(), WithStore(mem))}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1/thing", nil)
				resp, err := interactive.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
				wg.Wait()
				reserve := work.DefaultReserve.Share * float64(cfg.Limit)
				t.Logf("batch spent %d of %d, reserve %v", batchOK.Load(), cfg.Limit, reserve)
				assert.LessOrEqual(t, float64(batchOK.Load()), float64(cfg.Limit)-reserve, "batch work leaves the reserve once interactive work answered")
			})
		})
	}
}
