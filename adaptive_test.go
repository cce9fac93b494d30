package pacer

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/internal/quota"
	"github.com/pacer-go/pacer/observe"
)

func TestNewAdaptivePanicsOnInvalidConfigNamingTheField(t *testing.T) {
	cases := []struct {
		name string
		cfg  AdaptiveConfig
		want string
	}{
		{"safety above one", AdaptiveConfig{SafetyFactor: 1.5}, "pacer: AdaptiveConfig.SafetyFactor must be in (0,1], got 1.5"},
		{"negative safety", AdaptiveConfig{SafetyFactor: -0.1}, "pacer: AdaptiveConfig.SafetyFactor must be in (0,1], got -0.1"},
		{"NaN safety", AdaptiveConfig{SafetyFactor: math.NaN()}, "pacer: AdaptiveConfig.SafetyFactor must be in (0,1], got NaN"},
		{"negative min limit", AdaptiveConfig{MinLimit: -1}, "pacer: AdaptiveConfig.MinLimit must be a positive finite rate, got -1"},
		{"NaN min limit", AdaptiveConfig{MinLimit: Limit(math.NaN())}, "pacer: AdaptiveConfig.MinLimit must be a positive finite rate, got NaN"},
		{"infinite min limit", AdaptiveConfig{MinLimit: Inf}, "pacer: AdaptiveConfig.MinLimit must be a positive finite rate, got 1.7976931348623157e+308"},
		{"negative ceiling", AdaptiveConfig{Ceiling: -2}, "pacer: AdaptiveConfig.Ceiling must be ≥ 0, got -2"},
		{"NaN ceiling", AdaptiveConfig{Ceiling: Limit(math.NaN())}, "pacer: AdaptiveConfig.Ceiling must be ≥ 0, got NaN"},
		{"negative ceiling burst", AdaptiveConfig{CeilingBurst: -1}, "pacer: AdaptiveConfig.CeilingBurst must be ≥ 0, got -1"},
		{"negative max wait", AdaptiveConfig{MaxWait: -time.Second}, "pacer: AdaptiveConfig.MaxWait must be ≥ 0, got -1s"},
		{"negative max delay", AdaptiveConfig{MaxDelay: -time.Second}, "pacer: AdaptiveConfig.MaxDelay must be ≥ 0, got -1s"},
		{"negative slow start", AdaptiveConfig{SlowStart: -3}, "pacer: AdaptiveConfig.SlowStart must be ≥ 0, got -3"},
		{"quota with no limit", AdaptiveConfig{Quotas: []Quota{{Window: time.Hour}}}, "pacer: AdaptiveConfig.Quotas[0].Limit must be a positive finite count, got 0"},
		{"quota with NaN limit", AdaptiveConfig{Quotas: []Quota{{Limit: math.NaN(), Window: time.Hour}}}, "pacer: AdaptiveConfig.Quotas[0].Limit must be a positive finite count, got NaN"},
		{"quota with no window", AdaptiveConfig{Quotas: []Quota{{Limit: 10, Window: time.Hour}, {Limit: 10}}}, "pacer: AdaptiveConfig.Quotas[1].Window must be in (0, 768h0m0s], got 0s"},
		{"quota with a window past the horizon", AdaptiveConfig{Quotas: []Quota{{Limit: 10, Window: 800 * time.Hour}}}, "pacer: AdaptiveConfig.Quotas[0].Window must be in (0, 768h0m0s], got 800h0m0s"},
		{"quota stating what is left", AdaptiveConfig{Quotas: []Quota{{Limit: 10, Window: time.Hour, Remaining: 5}}}, "pacer: AdaptiveConfig.Quotas[0].Remaining must be 0 (a stated quota starts full), got 5"},
		{"quota of tokens", AdaptiveConfig{Quotas: []Quota{{Limit: 10, Window: time.Hour, Unit: UnitTokens}}}, "pacer: AdaptiveConfig.Quotas[0].Unit must be UnitRequests (a stated quota counts requests), got tokens"},
		{"two quotas of one name", AdaptiveConfig{Quotas: []Quota{{Name: "hour", Limit: 10, Window: time.Hour}, {Name: "hour", Limit: 20, Window: time.Hour}}}, "pacer: AdaptiveConfig.Quotas[1].Name must be unique to one Limit per Window, got hour"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tc.want, func() { NewAdaptive(tc.cfg) })
		})
	}
}

// budgets is what the tightest request quota and the tightest token quota
// afford above what they keep back (R4), as the limiter's next decision
// reads them (+Inf with none): the book advanced to now, as retune does.
func budgets(a *Adaptive) (req, tok float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.book.Advance(time.Now(), a.counts(float64(a.inflight.Load())), max(units(a.avgCost.Load()), 1))
	return p.Req.Budget, p.Tok.Budget
}

func requestBudget(a *Adaptive) float64 {
	req, _ := budgets(a)
	return req
}

func tokenBudget(a *Adaptive) float64 {
	_, tok := budgets(a)
	return tok
}

func TestAdaptiveIsUnlimitedUntilTheServerSaysOtherwise(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		assert.Equal(t, observe.ModeSlowStart, a.Stats().Mode)
		admit(t, a, 0).Done(reply(http.StatusOK))
		st := a.Stats()
		assert.Equal(t, Inf, st.Limit)
		assert.Equal(t, observe.ModeProbing, st.Mode)
		start := time.Now()
		for range 1000 {
			admit(t, a, 0)
		}
		assert.Zero(t, time.Since(start), "a server that never throttles is never slowed")
		assert.Equal(t, 1000, a.Stats().InFlight)
	})
}

func TestAdaptiveSpendsWhatTheQuotaAffordsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{SafetyFactor: 0.9})
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(600, 599, time.Minute)))
		st := a.Stats()
		assert.Equal(t, observe.ModeHeaders, st.Mode)
		assert.Equal(t, Inf, st.Limit, "no pacing while the quota affords the work")
		start := time.Now()
		permits := make([]Permit, 599)
		for i := range permits {
			var err error
			permits[i], err = a.Acquire(context.Background(), 0)
			require.NoError(t, err)
		}
		assert.Zero(t, time.Since(start), "all that is left goes at once")
		assert.Equal(t, 0.0, requestBudget(a))
		for i := range permits {
			permits[i].Done(reply(http.StatusOK, requestsLeft(600, float64(598-i), time.Minute)))
		}
		// The next waits for the reset (plus quota.RollGuard): the window is spent.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := a.Acquire(ctx, 0)
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle, "refused at once: the reset is past the deadline")
		assert.WithinDuration(t, start.Add(time.Minute), rle.RetryAt, 20*time.Millisecond)
	})
}

func TestAdaptiveSpreadsAQuotaOthersSpendFrom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{SafetyFactor: 0.9, SlowStart: 2})
		p1, p2 := admit(t, a, 0), admit(t, a, 0)
		p1.Done(reply(http.StatusOK, requestsLeft(600, 598, time.Minute)))
		// 20 fewer than our own requests explain: someone else spends here.
		p2.Done(reply(http.StatusOK, requestsLeft(600, 577, time.Minute)))
		st := a.Stats()
		assert.NotEqual(t, Inf, st.Limit, "a shared quota is spread to its reset")
		assert.InDelta(t, 0.9*577/60, float64(st.Limit), 0.5)
	})
}

func TestAdaptiveCountsRequestsInFlightAgainstTheRemainingQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{SlowStart: 10})
		first := admit(t, a, 0)
		for range 4 {
			admit(t, a, 0)
		}
		// The first response says 100 left; the other four requests may not
		// have been counted yet.
		first.Done(reply(http.StatusOK, requestsLeft(200, 100, time.Minute)))
		assert.Equal(t, 96.0, requestBudget(a))
		assert.Equal(t, 4, a.Stats().InFlight)
	})
}

func TestAdaptiveIgnoresAStaleHigherRemainingFromTheSameWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{SlowStart: 2})
		p1, p2 := admit(t, a, 0), admit(t, a, 0)
		p1.Done(reply(http.StatusOK, requestsLeft(100, 50, time.Minute)))
		limit := a.Stats().Limit
		// An older response, overtaken by the first, arrives late (the
		// same instant: the same reset).
		p2.Done(reply(http.StatusOK, requestsLeft(100, 80, time.Minute)))
		// With nothing of ours in flight any more, the lowest figure of the
		// window is exact: 50, not the stale 80.
		assert.Equal(t, 50.0, requestBudget(a))
		assert.LessOrEqual(t, a.Stats().Limit, limit, "a stale response must not loosen the limit")
	})
}

func TestAdaptiveBelievesALaterResetAsANewWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(100, 3, 2*time.Second)))
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(100, 99, 62*time.Second)))
		assert.Equal(t, 99.0, requestBudget(a))
	})
}

func TestAdaptivePausesUntilResetWhenTheQuotaIsSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		reset := time.Now().Add(30 * time.Second)
		admit(t, a, 0).Done(reply(http.StatusTooManyRequests, requestsLeft(100, 0, 30*time.Second)))
		st := a.Stats()
		assert.Equal(t, int64(1), st.Throttled)
		assert.False(t, st.PausedUntil.Before(reset), "paused until the reset")
		assert.False(t, a.nextAllowed().Before(reset))
		took := waitTook(t, a)
		assert.GreaterOrEqual(t, took, 30*time.Second)
		// Released as the reset passes, and two units of a sliding window's
		// refill (2 × 30 s / 100) while the quota is not known to refill.
		assert.LessOrEqual(t, took, 30*time.Second+quota.RollGuard+600*time.Millisecond, "released as the reset passes")
	})
}

func TestAdaptiveOpensANewWindowWithOneLook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		start := time.Now()
		q := func(remaining float64, reset time.Time) []string {
			return policyLeft("default", 60, time.Minute, remaining, time.Until(reset))
		}
		admit(t, a, 0).Done(reply(http.StatusOK, q(0, start.Add(10*time.Second))))
		var mu sync.Mutex
		var at []time.Duration
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				p := admit(t, a, 0)
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
				time.Sleep(100 * time.Millisecond) // the round trip
				p.Done(reply(http.StatusOK, q(float64(59-i), start.Add(70*time.Second))))
			})
		}
		wg.Wait()
		require.Len(t, at, 5)
		slices.Sort(at)
		// One request looks at the new window as it opens; the rest go
		// together once its answer shows the quota refilled.
		// A window not yet seen to refill waits two units of a sliding
		// window's refill after the reset (2 × 60 s / 60), at most a
		// second (quota.Roll).
		assert.Equal(t, 10*time.Second+time.Second, at[0])
		assert.Equal(t, at[0]+100*time.Millisecond, at[1])
		assert.Equal(t, at[1], at[4])
	})
}

func TestAdaptiveHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		admit(t, a, 0).Done(reply(http.StatusTooManyRequests, retryAfter(10*time.Second)))
		assert.WithinRange(t, a.nextAllowed(), time.Now().Add(10*time.Second), time.Now().Add(12*time.Second))
		assert.GreaterOrEqual(t, waitTook(t, a), 10*time.Second)
	})
}

func TestAdaptiveCapsRetryAfterAtMaxDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{MaxDelay: time.Minute})
		admit(t, a, 0).Done(reply(http.StatusServiceUnavailable, retryAfter(484289*time.Hour)))
		took := waitTook(t, a)
		assert.GreaterOrEqual(t, took, time.Minute)
		assert.Less(t, took, 2*time.Minute)
	})
}

func TestAdaptiveFailsFastWhenTheWaitExceedsMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{Key: "https://api.example.com", MaxWait: 30 * time.Second})
		admit(t, a, 0).Done(reply(http.StatusTooManyRequests, retryAfter(10*time.Minute)))
		start := time.Now()
		_, err := a.Acquire(context.Background(), 0)
		assert.Zero(t, time.Since(start), "fails at once, no sleeping")
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		assert.Equal(t, "https://api.example.com", rle.Endpoint)
		assert.WithinRange(t, rle.RetryAt, start.Add(10*time.Minute), start.Add(10*time.Minute+2*time.Second))
		assert.Equal(t, Info{RetryAfter: 10 * time.Minute}, rle.Info, "what the response said")
		assert.NoError(t, rle.Err)
		assert.Zero(t, a.Stats().InFlight, "nothing consumed")
	})
}

func TestAdaptiveFailsFastWhenTheWaitPassesTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(10, 0, time.Minute)))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := a.Acquire(ctx, 0)
		assert.Zero(t, time.Since(start))
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, rle.RetryAt.Before(start.Add(time.Minute)))
	})
}

func TestAdaptiveWaitReturnsPromptlyOnCancelAndRefunds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(100, 0, time.Minute)))
		budget := requestBudget(a)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := a.Acquire(ctx, 0)
			done <- err
		}()
		synctest.Wait()
		assert.Equal(t, 1, a.Stats().Waiting)
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		assert.Equal(t, budget, requestBudget(a), "a cancelled wait charges no quota")
		assert.Zero(t, a.Stats().InFlight)
		assert.Zero(t, a.Stats().Waiting)
	})
}

func TestAdaptiveSlowStartHoldsRequestsUntilTheFirstResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{SlowStart: 2})
		p1, p2 := admit(t, a, 0), admit(t, a, 0)
		third := make(chan error)
		go func() {
			_, err := a.Acquire(context.Background(), 0)
			third <- err
		}()
		synctest.Wait()
		select {
		case <-third:
			t.Fatal("a third request started before any response")
		default:
		}
		p1.Done(nil) // a transport error is not a response: one slot frees
		require.NoError(t, <-third)
		p2.Done(reply(http.StatusOK))
		for range 100 {
			admit(t, a, 0)
		}
		assert.Equal(t, 101, a.Stats().InFlight, "after the first response slow start is over")
	})
}

func TestAdaptiveFanOutOntoAnExhaustedQuotaCostsAtMostSlowStart429s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: 10, Window: time.Hour, Latency: 50 * time.Millisecond})
		rt := srv.Transport()
		send := func(ctx context.Context) (*http.Response, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/x", nil)
			return rt.RoundTrip(req)
		}
		for range 10 { // someone else spent the quota
			resp, err := send(context.Background())
			require.NoError(t, err)
			resp.Body.Close()
		}
		a := NewAdaptive(AdaptiveConfig{MaxWait: time.Minute})
		var wg sync.WaitGroup
		for range 1000 {
			wg.Go(func() {
				p, err := a.Acquire(context.Background(), 0)
				if err != nil {
					return
				}
				resp, err := send(context.Background())
				if err != nil {
					p.Done(nil)
					return
				}
				p.Done(resp)
				resp.Body.Close()
			})
		}
		wg.Wait()
		assert.Equal(t, DefaultSlowStart, srv.Stats().Throttled, "the first round, not a thousand")
		assert.Equal(t, 10+DefaultSlowStart, srv.Stats().Requests)
	})
}

func TestAdaptiveChargesCostOnlyToTokenQuotas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		// A first look with a stated cost: its figures teach no blind cost.
		admit(t, a, 10000).Done(reply(http.StatusOK,
			requestsLeft(1000, 999, time.Minute), tokensLeft(100000, 90000, time.Minute)))
		admit(t, a, 500)
		assert.Equal(t, 89500.0-10000, tokenBudget(a), "less the reserve of a tenth of the limit (R4)")
		assert.Equal(t, 998.0, requestBudget(a))
		admit(t, a, 0)
		assert.Equal(t, 89500.0-10000, tokenBudget(a), "no cost stated or learnt, no tokens")
		assert.Equal(t, 997.0, requestBudget(a))
	})
}

// The first look at a token quota, one blind request alone, sizes the
// blind requests after it: a quota found at least half full lost at most
// what the request cost (more if others spent beside it), and that drop is
// the first estimate, charged with the doubt of a single sample (twice
// it), so a burst of callers after the look goes as far as it affords,
// not all at once into the quota.
func TestTheFirstLooksDropSizesTheBlindBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		admit(t, a, 0).Done(reply(http.StatusOK,
			requestsLeft(500, 499, time.Minute), tokensLeft(40000, 38000, time.Minute)))
		assert.Equal(t, 4000.0, a.Stats().Costs[0].Charged, "the drop, 2,000, and its doubt")
		var n int
		for range 64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			_, err := a.Acquire(ctx, 0)
			cancel()
			if err != nil {
				break
			}
			n++
		}
		// 38,000 less the tenth a token quota keeps back, 4,000 a request.
		assert.Equal(t, 8, n, "blind requests admitted at once after the look")

		b := NewAdaptive(AdaptiveConfig{})
		admit(t, b, 0).Done(reply(http.StatusOK,
			requestsLeft(500, 499, time.Minute), tokensLeft(40000, 15000, time.Minute)))
		assert.Empty(t, b.Stats().Costs, "a quota found mostly spent says little of one request")
	})
}

func TestAdaptiveHoldsACostlyRequestUntilTheTokenQuotaResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		admit(t, a, 0).Done(reply(http.StatusOK,
			requestsLeft(1000, 999, 20*time.Second), tokensLeft(10000, 1500, 20*time.Second)))
		start := time.Now()
		p := admit(t, a, 0)
		assert.Less(t, time.Since(start), time.Second, "requests without a cost are not held by tokens")
		p.Done(reply(http.StatusOK,
			requestsLeft(1000, 998, 20*time.Second-time.Since(start)), tokensLeft(10000, 1500, 20*time.Second-time.Since(start))))
		took := func() time.Duration {
			start := time.Now()
			admit(t, a, 4000)
			return time.Since(start)
		}()
		assert.GreaterOrEqual(t, took, 20*time.Second)
	})
}

func TestAdaptiveNeverExceedsTheCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{Ceiling: 5, CeilingBurst: 1})
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(1e6, 1e6-1, time.Hour)))
		st := a.Stats()
		assert.Equal(t, Limit(5), st.Limit)
		assert.Equal(t, 1, st.Burst)
		start := time.Now()
		for range 51 {
			admit(t, a, 0)
		}
		assert.GreaterOrEqual(t, time.Since(start), 10*time.Second, "51 requests at 5/s")
	})
}

func TestAdaptiveWithOnlyACeilingIsAStaticBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{Ceiling: 2, CeilingBurst: 4})
		admit(t, a, 0).Done(reply(http.StatusOK))
		st := a.Stats()
		assert.Equal(t, observe.ModeStatic, st.Mode)
		assert.Equal(t, Limit(2), st.Limit)
		assert.Equal(t, 4, st.Burst)
	})
}

func TestAdaptiveProbingCutsTheRateOnAThrottleAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{MinLimit: 0.5})
		admit(t, a, 0).Done(reply(http.StatusOK))
		// Send at 10/s for a few seconds, then hit a bare 429.
		for range 30 {
			time.Sleep(100 * time.Millisecond)
			admit(t, a, 0).Done(reply(http.StatusOK))
		}
		p1, p2 := admit(t, a, 0), admit(t, a, 0)
		p1.Done(reply(http.StatusTooManyRequests))
		st := a.Stats()
		assert.Equal(t, observe.ModeProbing, st.Mode)
		assert.InDelta(t, 0.7*10, float64(st.Limit), 1, "multiplicative decrease to 0.7 × the send rate")
		cut := st.Limit

		// Throttles of requests already in flight belong to the same event.
		p2.Done(reply(http.StatusTooManyRequests))
		assert.Equal(t, cut, a.Stats().Limit)

		// Successes let it climb back towards the rate it was throttled at.
		for range 100 {
			admit(t, a, 0).Done(reply(http.StatusOK))
		}
		assert.Greater(t, a.Stats().Limit, cut)
	})
}

func TestAdaptiveProbingNeverGoesBelowMinLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{MinLimit: 2})
		p := admit(t, a, 0)
		for range 50 {
			p.Done(reply(http.StatusServiceUnavailable))
			p = admit(t, a, 0)
		}
		assert.GreaterOrEqual(t, float64(a.Stats().Limit), 2.0)
		assert.Equal(t, int64(50), a.Stats().Throttled)
	})
}

func TestAdaptiveLearnDoesNotTouchInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{SlowStart: 3})
		admit(t, a, 0)
		admit(t, a, 0)
		// What the Transport reads of a response another limiter admitted.
		a.learnOther(meaningOf(reply(http.StatusOK, requestsLeft(100, 90, time.Minute)), time.Now()))
		st := a.Stats()
		assert.Equal(t, 2, st.InFlight)
		assert.Equal(t, observe.ModeHeaders, st.Mode, "a response ends slow start")
		assert.Equal(t, 88.0, requestBudget(a), "both requests in flight count")
	})
}

// recorder is a slog.Handler that keeps records.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) levels() map[slog.Level][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[slog.Level][]string{}
	for _, rec := range r.records {
		out[rec.Level] = append(out[rec.Level], rec.Message)
	}
	return out
}

func TestAdaptiveLogsRetunesAtDebugAndThrottlesAtWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		a := NewAdaptive(AdaptiveConfig{Key: "api", Logger: slog.New(rec)})
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(100, 99, time.Minute)))
		admit(t, a, 0).Done(reply(http.StatusTooManyRequests, retryAfter(time.Second)))
		levels := rec.levels()
		assert.Contains(t, levels[slog.LevelDebug], "pacer: retuned")
		assert.Equal(t, []string{"pacer: throttled"}, levels[slog.LevelWarn])
	})
}

func TestAdaptiveIgnoresHostileCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{SlowStart: 4})
		for _, cost := range []float64{math.NaN(), -5, math.Inf(1), math.Inf(-1)} {
			admit(t, a, cost)
		}
		assert.Equal(t, 4, a.Stats().InFlight)
	})
}

// A hostile or broken figure in a response never reaches the quota model:
// the parser drops it (a Quota with NaN, a negative or an infinite count
// cannot come out of a response; the model's own guard against one is
// specified in internal/quota, "hostile counts are dropped"). End to end,
// such a server changes nothing it should not and never panics the limiter.
func TestAdaptiveIgnoresHostileHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{SlowStart: 10})
		for _, fields := range [][]string{
			{"RateLimit", `"nan";r=NaN;t=60`},                                      // not RFC 9651: the field is dropped
			{"RateLimit", `"neg";r=-5;t=60`},                                       // a negative count
			{"RateLimit-Policy", `"inf";q=1` + strings.Repeat("0", 400) + `;w=60`}, // a limit no number holds
			// More left than the limit, and a negative window.
			{"RateLimit-Policy", `"window";q=10;w=-1`, "RateLimit", `"window";r=50;t=60`},
		} {
			p := admit(t, a, 0)
			assert.NotPanics(t, func() { p.Done(reply(http.StatusOK, fields)) })
		}
		p := admit(t, a, 0)
		assert.NotPanics(t, func() { p.Done(reply(http.StatusTooManyRequests, []string{"Retry-After", "-3600"})) })
		a.mu.Lock()
		tracked := a.book.Len()
		a.mu.Unlock()
		assert.Equal(t, 1, tracked, "nan, neg and inf not tracked, window is")
		assert.LessOrEqual(t, requestBudget(a), 10.0, "remaining clamped to the limit")
	})
}

func TestAdaptiveClampsAResetBeyondMaxDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{MaxDelay: time.Hour})
		now := time.Now()
		admit(t, a, 0).Done(reply(http.StatusOK, policyLeft("far", 10, 0, 0, 1000*time.Hour)))
		assert.WithinRange(t, a.nextAllowed(), now.Add(time.Hour), now.Add(time.Hour+time.Second))
	})
}

func TestAdaptiveStatsReportsLastInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		admit(t, a, 0).Done(reply(http.StatusOK, requestsLeft(100, 42, time.Minute)))
		st := a.Stats()
		info := Info{Quotas: []Quota{{Name: "requests", Limit: 100, Remaining: 42, Reset: time.Now().Add(time.Minute)}}}
		assert.Equal(t, info, st.LastInfo)
		st.LastInfo.Quotas[0].Remaining = 7 // a copy: the caller may keep it
		assert.Equal(t, 42.0, a.Stats().LastInfo.Quotas[0].Remaining)
		assert.Equal(t, int64(1), st.Requests)
	})
}

// A quota stated twice (WithQuota's of one pattern can repeat one) is one
// quota, not two budgets of the same count.
func TestAQuotaStatedTwiceIsOne(t *testing.T) {
	a := NewAdaptive(AdaptiveConfig{Quotas: []Quota{{Limit: 10, Window: time.Hour}, {Limit: 20, Window: time.Minute}, {Limit: 10, Window: time.Hour}}})
	a.mu.Lock()
	defer a.mu.Unlock()
	require.Len(t, a.stated, 2)
	assert.Equal(t, "10 per 1h0m0s", a.stated[0].name)
	assert.Equal(t, "20 per 1m0s", a.stated[1].name)
	assert.Equal(t, 2, a.book.Len())
}
