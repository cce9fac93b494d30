package pacer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/retry"
	"github.com/pacer-go/pacer/work"
)

// tokenRun is what one token-quota run measured.
type tokenRun struct {
	requests, ok  int
	late, lateReq int     // 429s, and requests, after the first minute
	afterFirst    int     // 429s to requests sent once the first response was in
	goodput       float64 // tokens used ÷ the token quota's capacity over the run
	// estErr is the learnt cost's error (Stats.Costs' Mean ÷ the true
	// mean − 1) at the end of each minute, NaN while none was learnt.
	estErr []float64
	// stats is the endpoint's Stats at the end of each minute, for the
	// log of a failed run.
	stats []string
}

func (r tokenRun) String() string {
	s := fmt.Sprintf("%d requests, %d OK, goodput %.3f of the token bound, %d of %d (%.1f%%) 429s after the first minute",
		r.requests, r.ok, r.goodput, r.late, r.lateReq, 100*float64(r.late)/float64(max(1, r.lateReq)))
	if len(r.estErr) > 0 {
		s += "; cost estimate's error by minute:"
		for _, e := range r.estErr {
			s += fmt.Sprintf(" %+.0f%%", 100*e)
		}
	}
	return s
}

// tokenLoad is the mean token use of a request: in all (a quota of tokens
// in all, OpenAI's), or as input and output (Anthropic's input and output
// token quotas). Each request uses each mean ± 50%.
type tokenLoad struct{ total, input, output float64 }

// binds is the quota that binds, and its mean use per request. (A quota
// that does not bind is rarely seen spent from, and its estimate may stay
// rough, or unlearnt, at no cost.)
func (l tokenLoad) binds(cfg apisim.Config) (string, float64) {
	if l.total > 0 {
		return "tokens", l.total
	}
	if l.input/float64(cfg.InputTokenLimit) >= l.output/float64(cfg.OutputTokenLimit) {
		return "input-tokens", l.input
	}
	return "output-tokens", l.output
}

// runTokens runs workers callers for run against srv through a Transport,
// each request using tokens as load says (the server is charged the
// actual); hinted callers state the actual with work.WithCost.
func runTokens(t *testing.T, cfg apisim.Config, workers int, load tokenLoad, run time.Duration, hinted bool) tokenRun {
	t.Helper()
	var out tokenRun
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(cfg)
		tr := NewTransport(srv.Transport(), WithRetry(retry.Policy{Max: retry.None}))
		client := &http.Client{Transport: tr}
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		end := start.Add(run)
		var wg sync.WaitGroup
		for i := range workers {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			wg.Go(func() {
				for time.Now().Before(end) {
					cost := int(load.total * (0.5 + rng.Float64()))
					in := int(load.input * (0.5 + rng.Float64()))
					out := int(load.output * (0.5 + rng.Float64()))
					rctx := ctx
					if hinted {
						rctx = work.WithCost(ctx, float64(cost))
					}
					req, _ := http.NewRequestWithContext(rctx, http.MethodPost, "http://api.test/v1/chat/completions", nil)
					if load.total > 0 {
						req.Header.Set(apisim.TokensHeader, strconv.Itoa(cost))
					} else {
						req.Header.Set(apisim.InputTokensHeader, strconv.Itoa(in))
						req.Header.Set(apisim.OutputTokensHeader, strconv.Itoa(out))
					}
					resp, err := client.Do(req)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("Do at %v: %v", time.Since(start), err)
						}
						return
					}
					resp.Body.Close()
				}
			})
		}
		for range int(run / time.Minute) {
			time.Sleep(time.Minute)
			for _, st := range tr.Stats() {
				out.stats = append(out.stats, fmt.Sprintf("%v: limit %.2f/s burst %d, %d waiting, %d in flight, mode %v, paused until %v, costs %+v, last %+v",
					time.Since(start), float64(st.Limit), st.Burst, st.Waiting, st.InFlight, st.Mode, st.PausedUntil.Sub(start), st.Costs, st.LastInfo))
			}
			if hinted {
				continue
			}
			// The binding quota's estimate; NaN while it has none.
			e := math.NaN()
			name, mean := load.binds(cfg)
			for _, st := range tr.Stats() {
				for _, c := range st.Costs {
					if c.Quota == name {
						e = c.Mean/mean - 1
					}
				}
			}
			out.estErr = append(out.estErr, e)
		}
		time.Sleep(run % time.Minute)
		cancel()
		wg.Wait()
		st := srv.Stats()
		out.requests, out.ok = st.Requests, st.OK
		// Against the quota that binds.
		if cfg.TokenLimit > 0 {
			out.goodput = float64(st.TokensUsed) / srv.TokenCapacity(start, end)
		} else {
			out.goodput = max(float64(st.InputTokensUsed)/srv.InputTokenCapacity(start, end),
				float64(st.OutputTokensUsed)/srv.OutputTokenCapacity(start, end))
		}
		// The server admits a request as it arrives, and answers it
		// cfg.Latency later.
		events := srv.Events()
		firstAnswer := events[0].At.Add(cfg.Latency)
		for _, e := range events {
			if !e.At.Before(firstAnswer) && e.Status == http.StatusTooManyRequests {
				out.afterFirst++
			}
			if e.At.Sub(start) < time.Minute {
				continue
			}
			out.lateReq++
			if e.Status == http.StatusTooManyRequests {
				out.late++
			}
		}
	})
	return out
}

func TestTokenQuotaScenarios(t *testing.T) {
	openai := apisim.Config{Style: apisim.StyleOpenAI, Algorithm: apisim.TokenBucket,
		Limit: 500, TokenLimit: 40000, Window: time.Minute, Latency: 200 * time.Millisecond}
	anthropic := openai
	anthropic.Style = apisim.StyleAnthropic
	// Anthropic's tier-1 limits on input and output tokens apart (no
	// quota of tokens in all), input binding: a request's cost differs
	// per quota, which no one cost hint states.
	anthropicIO := apisim.Config{Style: apisim.StyleAnthropic, Algorithm: apisim.TokenBucket,
		Limit: 50, InputTokenLimit: 30000, OutputTokenLimit: 8000, Window: time.Minute, Latency: 200 * time.Millisecond}
	all, io := tokenLoad{total: 2000}, tokenLoad{input: 3000, output: 500}
	for _, sc := range []struct {
		name    string
		cfg     apisim.Config
		load    tokenLoad
		workers []int
		hinted  []bool
	}{
		{"openai", openai, all, []int{16, 64}, []bool{true, false}},
		{"anthropic", anthropic, all, []int{16, 64}, []bool{true, false}},
		{"anthropic-input-output", anthropicIO, io, []int{16, 32, 64}, []bool{false}},
	} {
		for _, workers := range sc.workers {
			for _, hinted := range sc.hinted {
				t.Run(fmt.Sprintf("%s/%d/hinted=%v", sc.name, workers, hinted), func(t *testing.T) {
					r := runTokens(t, sc.cfg, workers, sc.load, 10*time.Minute, hinted)
					t.Log(r)
					if hinted {
						// An exact cost leaves nothing to learn but the quota itself,
						// which the first response states.
						if r.late > 0 || r.afterFirst > 0 {
							t.Errorf("%d 429s after the first response, %d after the first minute, with an exact cost; want 0", r.afterFirst, r.late)
						}
					} else if 100*r.late > r.lateReq {
						t.Errorf("%d of %d requests met a 429 after the first minute without a cost hint, want at most 1%%", r.late, r.lateReq)
					}
					for i, e := range r.estErr[min(2, len(r.estErr)):] {
						// Samples of 8 requests costing ±50% vary by 10%,
						// and Anthropic rounds its figures to the thousand;
						// the estimate averages about two samples (at most
						// 19% off from minute 3 in 220 runs).
						if !(math.Abs(e) <= 0.25) {
							t.Errorf("minute %d: the learnt cost is off by %+.0f%%, want within 25%%", i+3, 100*e)
						}
					}
					if r.goodput < 0.9 {
						t.Errorf("goodput %.3f of the token bound, want at least 0.9", r.goodput)
					}
					if t.Failed() {
						for _, s := range r.stats {
							t.Log(s)
						}
					}
				})
			}
		}
	}
}

// Anthropic's tokens-* fields restate the input or the output token quota,
// whichever binds: beside both, they are not a quota of their own.
func TestDerivedQuotaIsAnthropicsMostRestrictive(t *testing.T) {
	// The quotas of an Anthropic response stating what is left of each
	// named one ("": an unnamed X-RateLimit quota).
	q := func(names ...string) []string {
		var h []string
		for _, n := range names {
			if n == "" {
				h = append(h, "X-Ratelimit-Remaining", "1")
			} else {
				h = append(h, "Anthropic-Ratelimit-"+n+"-Remaining", "1")
			}
		}
		return h
	}
	for _, tc := range []struct {
		quotas []string
		want   string
	}{
		{q("requests", "tokens", "input-tokens", "output-tokens"), "tokens"},
		{q("requests", "tokens"), ""},                 // OpenAI's, or Anthropic's alone: a quota
		{q("requests", "tokens", "input-tokens"), ""}, // the output quota unstated: tokens may be it
		{q(""), ""}, // unnamed quotas are never dropped
	} {
		m := meaningOf(reply(http.StatusOK, tc.quotas), time.Now())
		if got := derivedQuota(&m.Quotas); got != tc.want {
			t.Errorf("derivedQuota(%v) = %q, want %q", tc.quotas, got, tc.want)
		}
	}
}
