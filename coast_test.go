package pacer

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// githubHeader is a GitHub-style header: limit, remaining, an epoch reset,
// used and the core resource, and a Date and a Content-Type besides.
func githubHeader(limit, remaining int, reset time.Time) http.Header {
	return http.Header{
		"Date":                  {reset.Add(-time.Hour).UTC().Format(http.TimeFormat)},
		"Content-Type":          {"application/json"},
		"X-Ratelimit-Limit":     {strconv.Itoa(limit)},
		"X-Ratelimit-Remaining": {strconv.Itoa(remaining)},
		"X-Ratelimit-Reset":     {strconv.FormatInt(reset.Unix(), 10)},
		"X-Ratelimit-Used":      {strconv.Itoa(limit - remaining)},
		"X-Ratelimit-Resource":  {"core"},
	}
}

func TestSteadyPrintMatchesOnlyWhatParsesTheSameButForRemaining(t *testing.T) {
	reset := time.Unix(1_900_000_000, 0)
	learnt := githubHeader(5000, 4000, reset)
	p := newSteadyPrint(learnt)
	require.NotNil(t, p)
	with := func(f func(h http.Header)) http.Header {
		h := githubHeader(5000, 3990, reset)
		f(h)
		return h
	}
	for _, tc := range []struct {
		name string
		h    http.Header
		want bool
	}{
		{"the same", githubHeader(5000, 4000, reset), true},
		{"counted down, used up", githubHeader(5000, 3990, reset), true},
		{"at half the limit", githubHeader(5000, 2500, reset), true},
		{"under half the limit", githubHeader(5000, 2499, reset), false},
		{"another limit", githubHeader(6000, 3990, reset), false},
		{"another reset", githubHeader(5000, 3990, reset.Add(time.Hour)), false},
		{"another date", with(func(h http.Header) { h.Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT") }), true},
		{"another resource", with(func(h http.Header) { h.Set("X-Ratelimit-Resource", "search") }), false},
		{"a Retry-After more", with(func(h http.Header) { h.Set("Retry-After", "30") }), false},
		{"a Retry-After instead of another field", with(func(h http.Header) { h.Del("Content-Type"); h.Set("Retry-After", "30") }), true},
		{"a field less", with(func(h http.Header) { h.Del("X-Ratelimit-Used") }), false},
		{"remaining not a count", with(func(h http.Header) { h.Set("X-Ratelimit-Remaining", "lots") }), false},
		{"remaining negative", with(func(h http.Header) { h.Set("X-Ratelimit-Remaining", "-1") }), false},
		{"remaining twice", with(func(h http.Header) { h.Add("X-Ratelimit-Remaining", "3000") }), false},
		{"used not read beside limit and remaining", with(func(h http.Header) { h.Set("X-Ratelimit-Used", "x") }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, p.matches(tc.h, nil))
		})
	}
	// The one case above it cannot tell: a field traded for another of the
	// same count. A Retry-After on a success is what that would take.
}

func TestNoSteadyPrintForResponsesThatCannotCoast(t *testing.T) {
	reset := time.Unix(1_900_000_000, 0)
	for _, tc := range []struct {
		name string
		f    func(h http.Header)
	}{
		{"a Retry-After", func(h http.Header) { h.Set("Retry-After", "1") }},
		{"a Retry-After-Ms", func(h http.Header) { h.Set("Retry-After-Ms", "100") }},
		{"remaining without a limit", func(h http.Header) { h.Del("X-Ratelimit-Limit") }},
		{"a field with two values", func(h http.Header) { h.Add("X-Ratelimit-Reset", "1") }},
		{"a field in two spellings", func(h http.Header) { h["x-ratelimit-limit"] = []string{"5000"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := githubHeader(5000, 4000, reset)
			tc.f(h)
			assert.Nil(t, newSteadyPrint(h))
		})
	}
	// Only Used beside a limit: it is the count (limit − used), read.
	h := githubHeader(5000, 4000, reset)
	h.Del("X-Ratelimit-Remaining")
	p := newSteadyPrint(h)
	require.NotNil(t, p)
	h2 := githubHeader(5000, 3990, reset)
	h2.Del("X-Ratelimit-Remaining")
	assert.False(t, p.matches(h2, nil), "Used is the figure when Remaining is missing")
}

func TestSteadyPrintOfOpenAIAndAnthropicCountsEveryQuota(t *testing.T) {
	openai := func(req, tok int) http.Header {
		h := http.Header{}
		h.Set("X-Ratelimit-Limit-Requests", "10000")
		h.Set("X-Ratelimit-Remaining-Requests", strconv.Itoa(req))
		h.Set("X-Ratelimit-Reset-Requests", "6ms")
		h.Set("X-Ratelimit-Limit-Tokens", "2000000")
		h.Set("X-Ratelimit-Remaining-Tokens", strconv.Itoa(tok))
		h.Set("X-Ratelimit-Reset-Tokens", "0s")
		return h
	}
	p := newSteadyPrint(openai(9999, 1_999_000))
	require.NotNil(t, p)
	assert.True(t, p.matches(openai(9990, 1_990_000), nil))
	assert.False(t, p.matches(openai(4999, 1_990_000), nil), "requests under half")
	assert.False(t, p.matches(openai(9990, 999_999), nil), "tokens under half")

	anthropic := func(left int) http.Header {
		h := http.Header{}
		for _, q := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
			h.Set("anthropic-ratelimit-"+q+"-limit", "1000")
			h.Set("anthropic-ratelimit-"+q+"-remaining", strconv.Itoa(left))
			h.Set("anthropic-ratelimit-"+q+"-reset", "2026-11-23T20:00:00Z")
		}
		return h
	}
	p = newSteadyPrint(anthropic(900))
	require.NotNil(t, p, "twelve fields fit")
	assert.True(t, p.matches(anthropic(800), nil))
	assert.False(t, p.matches(anthropic(400), nil))
}

// steadyServer is a GitHub-style API whose quota only counts down:
// responses to coast on. spend takes n from the quota as another client
// would; set replaces the next responses' header.
type steadyServer struct {
	mu      sync.Mutex
	limit   int
	left    int
	reset   time.Time
	status  int
	edit    func(http.Header)
	answers int
}

func (s *steadyServer) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers++
	status := s.status
	if status == 0 {
		status = http.StatusOK
		s.left--
	}
	h := githubHeader(s.limit, s.left, s.reset)
	if s.edit != nil {
		s.edit(h)
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: r}, nil
}

// lastLearnt reports whether the core bucket's limiter learnt the last
// response in full (learning folds the coasted ones in: none are left).
func lastLearnt(t *testing.T, tr *Transport) bool {
	t.Helper()
	lim := tr.peekLimiter(newGet(t, "https://api.github.com/repos/a/b"))
	require.NotNil(t, lim)
	lim.lim.mu.Lock()
	defer lim.lim.mu.Unlock()
	return lim.lim.coasted == 0
}

// lastRemaining is the Remaining the core bucket's limiter reports.
func lastRemaining(t *testing.T, tr *Transport) float64 {
	t.Helper()
	for _, st := range tr.Stats() {
		if st.Key == "https://api.github.com#core" {
			require.Len(t, st.LastInfo.Quotas, 1)
			return st.LastInfo.Quotas[0].Remaining
		}
	}
	t.Fatal("no core limiter")
	return 0
}

func get(t *testing.T, tr *Transport) {
	t.Helper()
	resp, err := tr.RoundTrip(newGet(t, "https://api.github.com/repos/a/b"))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
}

// A steady client's responses coast at most coastRun in a row, and for at
// most coastSpan after the one learnt: the limiter never goes longer
// without reading the server.
func TestCoastingIsBoundedInResponsesAndTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &steadyServer{limit: 5000, left: 5000, reset: time.Now().Add(time.Hour)}
		tr := NewTransport(s)
		get(t, tr)
		get(t, tr)
		var run, longest, learns int
		for range 200 {
			get(t, tr)
			require.Equal(t, float64(s.left), lastRemaining(t, tr), "Stats has the newest figure, learnt or not")
			if lastLearnt(t, tr) {
				learns++
				run = 0
			} else {
				run++
				longest = max(longest, run)
			}
		}
		assert.Equal(t, coastRun, longest, "responses coasting in a row")
		assert.InDelta(t, 200/(coastRun+1), learns, 1)

		// Slower than coastSpan apart, every response is learnt.
		for range 20 {
			time.Sleep(coastSpan + time.Millisecond)
			get(t, tr)
			require.True(t, lastLearnt(t, tr))
		}
		// And every request is counted, coasting or not (the first, sent
		// by the host's limiter, taught the bucket's).
		core := tr.peekLimiter(newGet(t, "https://api.github.com/repos/a/b"))
		assert.EqualValues(t, s.answers, core.lim.Stats().Requests)
	})
}

// Whatever a decision would read is learnt at once, in the middle of a run
// of coasting responses.
func TestWhatMattersIsLearntAtOnceWhileCoasting(t *testing.T) {
	for _, tc := range []struct {
		name        string
		edit        func(s *steadyServer)
		coastsAfter bool // the response learnt allows coasting again
	}{
		{"half the quota spent by someone else", func(s *steadyServer) { s.left = s.limit/2 - 1 }, false},
		{"a new window", func(s *steadyServer) { s.reset = s.reset.Add(time.Hour); s.left = s.limit }, true},
		{"another resource", func(s *steadyServer) {
			s.edit = func(h http.Header) { h.Set("X-Ratelimit-Resource", "search") }
		}, false},
		{"a 429", func(s *steadyServer) { s.status = http.StatusTooManyRequests }, false},
		{"a Retry-After", func(s *steadyServer) { s.edit = func(h http.Header) { h.Set("Retry-After", "1") } }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &steadyServer{limit: 5000, left: 5000, reset: time.Now().Add(time.Hour)}
				tr := NewTransport(s, WithRetries(0))
				for range 4 {
					get(t, tr)
				}
				core := tr.peekLimiter(newGet(t, "https://api.github.com/repos/a/b")).lim
				require.Positive(t, core.coastLeft.Load(), "coasting")
				require.False(t, lastLearnt(t, tr), "the last one coasted")
				s.mu.Lock()
				tc.edit(s)
				s.mu.Unlock()
				resp, err := tr.RoundTrip(newGet(t, "https://api.github.com/repos/a/b"))
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				if tc.name == "another resource" {
					// Learnt by the search bucket's limiter, which it creates.
					assert.Len(t, tr.Stats(), 3)
					return
				}
				assert.True(t, lastLearnt(t, tr), "the response was learnt")
				assert.Equal(t, tc.coastsAfter, core.coastLeft.Load() > 0, "coasting after it")
			})
		})
	}
}

// Coasting changes neither what the limiter admits nor what it estimates:
// a client far below its quota runs as fast, and its round-trip estimate,
// probe meter and inference counts are those of a limiter that learnt
// every response. The same for a server that states no quota.
func TestCoastingLearnsWhatLearningEveryResponseWould(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header func(left int, reset time.Time) http.Header
	}{
		{"github", func(left int, reset time.Time) http.Header { return githubHeader(10_000, left, reset) }},
		{"no quota stated", func(int, time.Time) http.Header {
			return http.Header{"Content-Type": {"application/json"}, "Date": {"Mon, 23 Nov 2026 20:00:00 GMT"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reset := time.Now().Add(time.Hour)
				run := func(coast bool) (*Adaptive, int) {
					a := NewAdaptive(AdaptiveConfig{})
					left, coasted := 10_000, 0
					for i := range 161 {
						p, err := a.Acquire(context.Background(), 0)
						require.NoError(t, err)
						time.Sleep(time.Millisecond)
						left--
						if !coast || i == 160 { // the last is learnt: all is folded in
							a.coastLeft.Store(0)
						}
						before := a.Stats().Requests
						a.mu.Lock()
						folded := a.coasted
						a.mu.Unlock()
						p.Done(&http.Response{StatusCode: http.StatusOK, Header: tc.header(left, reset), Body: http.NoBody})
						a.mu.Lock()
						if a.coasted > folded {
							coasted++
						}
						a.mu.Unlock()
						require.Equal(t, before+1, a.Stats().Requests)
					}
					return a, coasted
				}
				every, none := run(false)
				require.Zero(t, none)
				coasting, coasted := run(true)
				assert.Greater(t, coasted, 140, "responses that coasted")
				assert.EqualValues(t, 161, coasting.Stats().Requests)
				every.mu.Lock()
				coasting.mu.Lock()
				defer every.mu.Unlock()
				defer coasting.mu.Unlock()
				assert.InDelta(t, every.interval, coasting.interval, every.interval*0.01, "interval between responses")
				assert.InDelta(t, every.avgFlight, coasting.avgFlight, 0.01, "in flight")
				assert.Equal(t, every.probe.observed, coasting.probe.observed, "probe's meter")
				assert.Equal(t, every.probe.cycleOK, coasting.probe.cycleOK, "probe's successes")
				assert.Equal(t, every.infer.ok, coasting.infer.ok, "inference's successes")
				assert.Equal(t, every.infer.total, coasting.infer.total)
				assert.Zero(t, coasting.coasted, "folded into the last learn")
			})
		})
	}
}

// Nothing coasts behind a limiter that shares its quota through a store
// (others spend from it at any time), or after a response that is not a
// plain success: every response is learnt until one allows coasting again.
func TestNoCoastingWhileAnythingButTheBudgetIsInPlay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reset := time.Now().Add(time.Hour)
		send := func(a *Adaptive, status, left int, edit func(http.Header)) {
			t.Helper()
			p, err := a.Acquire(context.Background(), 0)
			require.NoError(t, err)
			h := githubHeader(10_000, left, reset)
			if edit != nil {
				edit(h)
			}
			p.Done(&http.Response{StatusCode: status, Header: h, Body: http.NoBody})
		}
		shared := NewAdaptive(AdaptiveConfig{Key: "k", Store: store.NewMemory()})
		for i := range 5 {
			send(shared, http.StatusOK, 9_999-i, nil)
			require.Zero(t, shared.coastLeft.Load(), "with a store")
		}

		a := NewAdaptive(AdaptiveConfig{})
		for i := range 3 {
			send(a, http.StatusOK, 9_999-i, nil)
		}
		require.Positive(t, a.coastLeft.Load())
		send(a, http.StatusServiceUnavailable, 9_990, nil)
		assert.Zero(t, a.coastLeft.Load(), "after a 503")
		send(a, http.StatusOK, 9_989, nil)
		assert.Positive(t, a.coastLeft.Load(), "a success allows it again")
		send(a, http.StatusTooManyRequests, 9_988, func(h http.Header) { h.Set("Retry-After", "2") })
		assert.Zero(t, a.coastLeft.Load(), "after a 429")
		time.Sleep(2 * time.Second)
		send(a, http.StatusOK, 9_987, nil)
		assert.Zero(t, a.coastLeft.Load(), "the probe took over from the 429 the quota did not explain")
	})
}

// Concurrent requests coast and learn side by side without losing count:
// every request settles, and the limiter ends with none in flight.
func TestCoastingUnderConcurrencyLosesNoRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &steadyServer{limit: 100_000, left: 100_000, reset: time.Now().Add(time.Hour)}
		tr := NewTransport(s)
		get(t, tr)
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for range 100 {
					get(t, tr)
				}
			})
		}
		wg.Wait()
		core := tr.peekLimiter(newGet(t, "https://api.github.com/repos/a/b")).lim
		st := core.Stats()
		assert.Zero(t, st.InFlight)
		assert.EqualValues(t, s.answers, st.Requests)
		assert.Zero(t, st.Throttled)
	})
}

// A server that states nothing coasts until it refuses: the refusal is
// learnt at once, and the quota inferred from it counts every success
// before it, coasted or not.
func TestInferredQuotaCountsTheSuccessesThatCoasted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := func(coast bool) *Adaptive {
			a := NewAdaptive(AdaptiveConfig{})
			done := func(status int, h http.Header) {
				p, err := a.Acquire(context.Background(), 0)
				require.NoError(t, err)
				time.Sleep(time.Millisecond)
				if !coast {
					a.coastLeft.Store(0)
				}
				p.Done(&http.Response{StatusCode: status, Header: h, Body: http.NoBody})
			}
			for range 100 {
				done(http.StatusOK, http.Header{"Content-Type": {"text/plain"}})
			}
			if coast {
				require.Positive(t, a.coastLeft.Load())
			}
			done(http.StatusTooManyRequests, http.Header{"Retry-After": {"10"}})
			assert.Zero(t, a.coastLeft.Load())
			return a
		}
		every, coasting := side(t, run)
		assert.EqualValues(t, 100, every.infer.limit)
		assert.Equal(t, every.infer.limit, coasting.infer.limit, "the inferred quota")
		assert.Equal(t, every.infer.total, coasting.infer.total)
		assert.Equal(t, every.infer.reset.Sub(every.infer.start), coasting.infer.reset.Sub(coasting.infer.start), "its reset")
	})
}

// A response overtaken by ones that coasted (an older, higher figure read
// after them) is known for what it is: it neither raises the budget nor
// reads as a refill, and the next figure not as someone else's spending.
// Without the coasted figures, one job of 800 onto 800 left read as a
// shared quota, was spread to its reset, and took 20 times as long.
func TestAnOvertakenResponseIsNotNewsAfterCoasting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reset := time.Now().Add(time.Hour)
		run := func(coast bool) *Adaptive {
			a := NewAdaptive(AdaptiveConfig{})
			first, err := a.Acquire(context.Background(), 0) // ends slow start
			require.NoError(t, err)
			first.Done(&http.Response{StatusCode: http.StatusOK, Header: githubHeader(10_000, 10_000, reset), Body: http.NoBody})
			var ps []Permit
			for range 30 {
				p, err := a.Acquire(context.Background(), 0)
				require.NoError(t, err)
				ps = append(ps, p)
			}
			// Answered out of order: the server counted the 30 requests
			// down from 10,000 in the order sent; the 10th answer is read
			// last, and learnt.
			order := append(slices.Delete(slices.Collect(func(yield func(int) bool) {
				for i := range ps {
					yield(i)
				}
			}), 9, 10), 9)
			for _, i := range order {
				if !coast || i == 9 {
					a.coastLeft.Store(0)
				}
				ps[i].Done(&http.Response{StatusCode: http.StatusOK, Header: githubHeader(10_000, 10_000-1-i, reset), Body: http.NoBody})
			}
			return a
		}
		every, coasting := side(t, run)
		we, wc := every.windows[0], coasting.windows[0]
		assert.Equal(t, we.low, wc.low, "the lowest figure of the window")
		assert.Equal(t, we.units(), wc.units(), "the budget")
		assert.False(t, wc.shared, "nobody else spends")
		assert.Zero(t, wc.drift)
	})
}

// A server whose rate-limit fields change with every response (here a
// reset stated in seconds from now, ticking down each time) never coasts, and is not made a print
// (a second parse and an allocation) for every response learnt either.
func TestPrintsNothingMatchesAreMadeEverMoreRarely(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveConfig{})
		prints, coasted := 0, 0
		last := a.print.Load()
		for i := range 1000 {
			p, err := a.Acquire(context.Background(), 0)
			require.NoError(t, err)
			time.Sleep(10 * time.Millisecond)
			h := http.Header{ // a reset in seconds from now, counting down
				"Ratelimit":        {`"default";r=` + strconv.Itoa(9_999-i) + `;t=` + strconv.Itoa(3000-i)},
				"Ratelimit-Policy": {`"default";q=10000;w=3600`},
			}
			p.Done(&http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody})
			if cur := a.print.Load(); cur != last {
				prints, last = prints+1, cur
			}
			a.mu.Lock()
			coasted += int(a.coasted)
			a.mu.Unlock()
		}
		require.Positive(t, a.coastLeft.Load(), "coasting is allowed")
		assert.Zero(t, coasted, "but nothing matches")
		assert.LessOrEqual(t, prints, 1000/maxPrintSkip+8, "prints made")
		t.Logf("%d prints for 1000 responses", prints)
	})
}

// side runs a limiter's scenario without coasting and with it, and returns
// both limiters locked (until t ends) for their state to be compared.
func side(t *testing.T, run func(coast bool) *Adaptive) (every, coasting *Adaptive) {
	every, coasting = run(false), run(true)
	every.mu.Lock()
	coasting.mu.Lock()
	t.Cleanup(func() {
		every.mu.Unlock()
		coasting.mu.Unlock()
	})
	return every, coasting
}
