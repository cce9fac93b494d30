package integrations_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/observe"
	"github.com/pacer-go/pacer/work"
)

// The LLM SDKs saturating a token quota: workers call again as soon as a
// call returns, for saturatedRun, against per-minute token buckets that
// bind long before the request quota does. Each call's prompt and
// completion are the means below scaled by one factor drawn within ±50%, so
// its cost varies as much and pacer's estimate of it is exercised.
const (
	meanPrompt   = 1500 // tokens
	meanOut      = 500  // tokens of max_tokens / max_completion_tokens
	saturatedRun = 10 * time.Minute

	// The quotas, per minute. OpenAI: 40,000 tokens, about 20 calls.
	// Anthropic: 60,000 input tokens (40 calls) and 16,000 output tokens
	// (32 calls), so the output-tokens quota binds. Requests: 1,000, which
	// never binds.
	openAITokens     = 40000
	anthropicInput   = 60000
	anthropicOutput  = 16000
	requestsInMinute = 1000
	llmLatency       = time.Second // a short completion

	// maxLate429 is the largest share of the requests the server sees after
	// the first minute that may meet a 429; minGoodput the least share of
	// the binding token quota's capacity after the first minute the calls
	// may use.
	maxLate429 = 0.01
	minGoodput = 0.9
)

// variedJob is call i's request: meanPrompt and meanOut scaled by a factor
// uniform in [0.5, 1.5), the same for call i in every run.
func variedJob(i int) llmJob {
	f := 0.5 + rand.New(rand.NewPCG(uint64(i), 14)).Float64()
	return llmJob{prompt: strings.Repeat("abc ", int(f*meanPrompt)), maxOut: int(f * meanOut)}
}

// saturated is what one saturated run measured, from the server's log.
type saturated struct {
	calls, cancelled int // calls answered, and calls cancelled at the end
	// Calls that failed, started in the first minute and after it.
	errsEarly, errs int
	firstErr        error
	early429        int           // requests answered 429 in the first minute
	slowest         time.Duration // the longest call answered
	requests        int           // requests the server saw
	late, late429   int           // requests after the first minute, and those answered 429
	goodput         float64       // binding token quota's tokens used after the first minute ÷ its capacity then
	goodputAll      float64       // the same over the whole run (the first minute's full bucket included)
	costs           []observe.Cost
}

func (r saturated) String() string {
	s := fmt.Sprintf("%d calls (%d cancelled at the end), %d requests, slowest call %v; first minute: %d 429s, %d calls failed; after it: %d of %d requests met a 429 (%.2f%%), %d calls failed, goodput %.3f of the token bound (%.3f over the whole run)",
		r.calls, r.cancelled, r.requests, r.slowest.Round(time.Second), r.early429, r.errsEarly, r.late429, r.late, 100*r.share429(), r.errs, r.goodput, r.goodputAll)
	for _, c := range r.costs {
		s += fmt.Sprintf("; %s learnt %.0f (charged %.0f)", c.Quota, c.Mean, c.Charged)
	}
	return s
}

func (r saturated) share429() float64 { return float64(r.late429) / float64(max(1, r.late)) }

// saturate runs workers callers of call against f for saturatedRun, each
// calling again as soon as its call returns; calls still waiting at the end
// are cancelled. It runs inside a synctest bubble.
func saturate(f *fake, tr *pacer.Transport, workers int, call func(ctx context.Context, i int) error) saturated {
	var r saturated
	ctx, cancel := context.WithCancel(background())
	start := time.Now()
	end := start.Add(saturatedRun)
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				i := int(next.Add(1)) - 1
				t0 := time.Now()
				early := t0.Sub(start) < time.Minute
				err := call(ctx, i)
				mu.Lock()
				switch {
				case err != nil && ctx.Err() != nil:
					r.cancelled++
				case err != nil && early:
					r.calls++
					r.errsEarly++
				case err != nil:
					r.calls++
					r.errs++
					if r.firstErr == nil {
						r.firstErr = err
					}
				default:
					r.calls++
					r.slowest = max(r.slowest, time.Since(t0))
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(saturatedRun)
	cancel()
	wg.Wait()

	// The token bound: the binding quota's capacity, its limit a minute.
	limit, outputBinds := float64(f.tokenLimit), false
	if f.outputLimit > 0 && float64(f.outputLimit)/meanOut < float64(f.tokenLimit)/meanPrompt {
		limit, outputBinds = float64(f.outputLimit), true
	}
	var used, usedLate float64
	for _, a := range f.log() {
		tokens := float64(a.tokens)
		if outputBinds {
			tokens = float64(a.outTokens)
		}
		used += tokens
		r.requests++
		if a.at.Sub(start) < time.Minute {
			if a.throttled {
				r.early429++
			}
			continue
		}
		usedLate += tokens
		r.late++
		if a.throttled {
			r.late429++
		}
	}
	minutes := saturatedRun.Minutes()
	r.goodput = usedLate / (limit * (minutes - 1))
	r.goodputAll = used / (limit * minutes)
	for _, st := range tr.Stats() {
		r.costs = append(r.costs, st.Costs...)
	}
	return r
}

// The recommended setup, with no cost stated: pacer learns what a call
// costs each token quota from the quota's own figures. And WithCost as the
// override, stating each call's exact cost (OpenAI's tokens quota counts the
// prompt and max_completion_tokens, which the caller knows).
//
// The bar, from the end of the first minute (the cost is learnt in it): at
// most maxLate429 of the requests meet a 429, no call fails, and the calls
// use at least minGoodput of the binding token quota.
func TestTokenQuotaSaturated(t *testing.T) {
	for _, sc := range []struct {
		sdk      string
		provider provider
		workers  int
		withCost bool
		// knownGap, when set, says why the core misses the bar in some
		// runs: the run is measured and logged, not failed.
		knownGap string
	}{
		{"openai-go", openAI, 16, false, ""},
		{"openai-go", openAI, 64, false, ""},
		{"anthropic-sdk-go", anthropicAPI, 16, false, ""},
		{"anthropic-sdk-go", anthropicAPI, 64, false, ""},
		{"openai-go", openAI, 16, true, ""},
		{"openai-go", openAI, 64, true, ""},
	} {
		name := fmt.Sprintf("%s/%d workers/WithCost=%v", sc.sdk, sc.workers, sc.withCost)
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: sc.provider, limit: requestsInMinute, window: time.Minute, latency: llmLatency}
				tr := pacer.NewTransport(inMemory{f})
				var call func(ctx context.Context, i int) error
				switch sc.provider {
				case openAI:
					f.tokenLimit = openAITokens
					c := openAIClient(tr, 0)
					call = func(ctx context.Context, i int) error {
						j := variedJob(i)
						if sc.withCost {
							ctx = work.WithCost(ctx, float64(j.cost()))
						}
						return chatJob(ctx, c, j)
					}
				case anthropicAPI:
					f.tokenLimit, f.outputLimit = anthropicInput, anthropicOutput
					c := anthropicClient(tr, 0)
					call = func(ctx context.Context, i int) error { return messageJob(ctx, c, variedJob(i)) }
				}
				r := saturate(f, tr, sc.workers, call)
				t.Log(r)
				cost := "no WithCost"
				if sc.withCost {
					cost = "exact WithCost"
				}
				record(t, row{sdk: sc.sdk, scenario: fmt.Sprintf("token quota binds, %d workers for %v, %s", sc.workers, saturatedRun, cost),
					calls: r.calls, requests: r.requests, throttled: f.stats().throttled, errs: r.errs + r.errsEarly,
					pacerRetries: retries(tr), elapsed: saturatedRun, slowest: r.slowest,
					note: fmt.Sprintf("after the first minute: %.2f%% 429s, %.3f of the token bound; first minute: %d 429s, %d calls failed",
						100*r.share429(), r.goodput, r.early429, r.errsEarly)})
				fail := t.Errorf
				if sc.knownGap != "" {
					fail = func(format string, args ...any) { t.Logf("known gap ("+sc.knownGap+"): "+format, args...) }
				}
				if r.errs != 0 {
					fail("%d calls after the first minute failed; first: %v", r.errs, r.firstErr)
				}
				if r.share429() > maxLate429 {
					fail("%d of %d requests after the first minute met a 429 (%.2f%%), want at most %.0f%%",
						r.late429, r.late, 100*r.share429(), 100*maxLate429)
				}
				if r.goodput < minGoodput {
					fail("goodput %.3f of the token bound after the first minute, want at least %.2f", r.goodput, minGoodput)
				}
			})
		})
	}
}
