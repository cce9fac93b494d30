package pacer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/observe"
	"github.com/pacer-go/pacer/retry"
	"github.com/pacer-go/pacer/work"
)

func TestInvalidOptionsPanicNamingTheOption(t *testing.T) {
	for _, tc := range []struct {
		want string
		opt  func() Option
	}{
		{"WithSafetyFactor(0)", func() Option { return WithSafetyFactor(0) }},
		{"WithSafetyFactor(1.5)", func() Option { return WithSafetyFactor(1.5) }},
		{"WithSafetyFactor(NaN)", func() Option { return WithSafetyFactor(math.NaN()) }},
		{`WithEndpoint("/x"): limit 0`, func() Option { return WithEndpoint("/x", 0, 1) }},
		{`WithEndpoint("/x"): limit -1`, func() Option { return WithEndpoint("/x", -1, 1) }},
		{`WithEndpoint("/x"): negative burst -2`, func() Option { return WithEndpoint("/x", 1, -2) }},
		{"WithKeyFunc(nil)", func() Option { return WithKeyFunc(nil) }},
		{"WithMaxWait(-1s)", func() Option { return WithMaxWait(-time.Second) }},
		{"WithMaxEndpoints(0)", func() Option { return WithMaxEndpoints(0) }},
		{"WithObserver(nil)", func() Option { return WithObserver(nil) }},
		{"WithStore(nil)", func() Option { return WithStore(nil) }},
		{`WithEndpoint("/x"): limit NaN`, func() Option { return WithEndpoint("/x", Limit(math.NaN()), 1) }},
	} {
		t.Run(tc.want, func(t *testing.T) {
			msg := panicMessage(func() { tc.opt() })
			assert.Contains(t, msg, "pacer: "+tc.want)
		})
	}
}

func TestInvalidOrConflictingPatternsPanicAtConstruction(t *testing.T) {
	msg := panicMessage(func() { NewTransport(nil, WithEndpoint("GET api.example.com/{x", Inf, 0)) })
	assert.Contains(t, msg, `pacer: WithEndpoint("GET api.example.com/{x")`)
	msg = panicMessage(func() {
		NewTransport(nil, WithEndpoint("GET /a/", Inf, 0), WithEndpoint("GET /a/", 5, 1))
	})
	assert.Contains(t, msg, `pacer: WithEndpoint("GET /a/")`)
}

// ServeMux never matches a request's port, so a pattern naming one would
// silently never apply: it is refused, as are hosts that cannot be hosts.
func TestPatternsThatCouldNeverMatchPanicAtConstruction(t *testing.T) {
	for pattern, want := range map[string]string{
		"api.example.com:8080/":  `host "api.example.com:8080" has a port`,
		"GET [::1]:8080/x":       `host "[::1]:8080" has a port`,
		"https://api.example/x":  `"https:" is not a host`,
		"GET api example.com /x": `"api example.com " is not a host`,
	} {
		msg := panicMessage(func() { NewTransport(nil, WithEndpoint(pattern, 5, 1)) })
		assert.Contains(t, msg, fmt.Sprintf("pacer: WithEndpoint(%q): %s", pattern, want))
	}
	msg := panicMessage(func() {
		NewTransport(nil, WithEndpoint("API.example.com/", 5, 1), WithEndpoint("api.example.com/", 5, 1))
	})
	assert.Contains(t, msg, "conflicts", "hosts differing only in case are one host")
}

func panicMessage(f func()) (msg string) {
	defer func() { msg = fmt.Sprint(recover()) }()
	f()
	return "no panic"
}

func TestNilBaseMeansDefaultTransport(t *testing.T) {
	assert.Same(t, http.DefaultTransport, NewTransport(nil).base)
}

type idleCloser struct {
	okTransport
	closed atomic.Int32
}

func (c *idleCloser) CloseIdleConnections() { c.closed.Add(1) }

func TestCloseIdleConnectionsIsForwardedToTheBase(t *testing.T) {
	base := &idleCloser{}
	client := &http.Client{Transport: NewTransport(base)}
	client.CloseIdleConnections()
	assert.EqualValues(t, 1, base.closed.Load())
	NewTransport(okTransport{}).CloseIdleConnections() // a base without the method is fine
}

func TestObserverSeesEveryAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []observe.Attempt
		m := newMock(respondInTurn(respond(429, "Retry-After", "3"), respond(200)))
		tr := NewTransport(m, WithObserver(func(a observe.Attempt) {
			mu.Lock()
			got = append(got, a)
			mu.Unlock()
		}), WithMaxWait(time.Minute))
		mustGet(t, tr, mockURL)
		require.Len(t, got, 2)
		assert.Equal(t, observe.Attempt{Endpoint: "https://api.example.com", Method: "GET", Status: 429, Throttled: true}, got[0])
		assert.GreaterOrEqual(t, got[1].Wait, 3*time.Second, "the retry waited Retry-After")
		assert.Less(t, got[1].Wait, 5*time.Second)
		got[1].Wait = 0
		assert.Equal(t, observe.Attempt{Endpoint: "https://api.example.com", Method: "GET", Retry: 1, Status: 200}, got[1])

		got = nil
		m2 := newMock(respondInTurn(respond(429, "Retry-After", "600")))
		tr2 := NewTransport(m2, WithRetry(retry.Policy{Max: retry.None}), WithMaxWait(time.Minute), WithObserver(func(a observe.Attempt) { got = append(got, a) }))
		mustGet(t, tr2, mockURL)
		r, _ := http.NewRequest(http.MethodGet, mockURL, nil)
		_, err := tr2.RoundTrip(r)
		require.Error(t, err)
		require.Len(t, got, 2)
		assert.ErrorAs(t, got[1].Err, new(*RateLimitError), "a refused attempt is reported too")
		assert.Zero(t, got[1].Status)
	})
}

func TestStatsCountRetriesRefusalsAndErrorsPerEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(429, "Retry-After", "1"), respond(200)))
		m.RegisterResponder(http.MethodGet, "https://down.example.com/", func(*http.Request) (*http.Response, error) {
			return nil, fmt.Errorf("dial tcp: connection refused")
		})
		tr := NewTransport(m)
		mustGet(t, tr, mockURL)
		r, _ := http.NewRequest(http.MethodGet, "https://down.example.com/", nil)
		_, err := tr.RoundTrip(r)
		require.Error(t, err)

		st := tr.Stats()
		require.Len(t, st, 2)
		assert.Equal(t, "https://api.example.com", st[0].Key)
		assert.EqualValues(t, 1, st[0].Retries)
		assert.EqualValues(t, 2, st[0].Requests)
		assert.Equal(t, "https://down.example.com", st[1].Key)
		assert.EqualValues(t, 1, st[1].Errors)
	})
}

type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func TestRetriesAreLoggedAtDebug(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &recordHandler{}
		tr := NewTransport(newMock(respondInTurn(respond(429, "Retry-After", "1"), respond(200))), WithLogger(slog.New(h)))
		mustGet(t, tr, mockURL)
		var found bool
		for _, r := range h.recs {
			if r.Message == "pacer: retrying throttled request" {
				found = true
				assert.Equal(t, slog.LevelDebug, r.Level)
			}
		}
		assert.True(t, found, "retry logged")
	})
}

// TestZeroConfigPacesEachHostSeparately runs two simulated APIs behind one
// zero-config transport: each host gets its own limiter, and neither host's
// quota is overrun.
func TestZeroConfigPacesEachHostSeparately(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := apisim.New(apisim.Config{Style: apisim.StyleIETF, Limit: 10, Window: time.Second})
		b := apisim.New(apisim.Config{Style: apisim.StyleRetryAfter, Limit: 5, Window: time.Second})
		tr := NewTransport(hostMux{"a.example.com": a.Transport(), "b.example.com": b.Transport()})
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		for _, host := range []string{"a.example.com", "b.example.com"} {
			for range 4 {
				wg.Go(func() {
					for range 10 {
						resp, err := client.Get("https://" + host + "/v1/x")
						if assert.NoError(t, err) {
							resp.Body.Close()
						}
					}
				})
			}
		}
		wg.Wait()
		assert.Equal(t, []string{"https://a.example.com", "https://b.example.com"}, endpointKeys(tr))
		sa, sb := a.Stats(), b.Stats()
		assert.Equal(t, 40, sa.OK, "every request succeeded")
		assert.Equal(t, 40, sb.OK, "every request succeeded, throttled ones after a retry")
		assert.Zero(t, sa.Throttled, "a's headers were learnt from the first response and never overrun")
		assert.LessOrEqual(t, sb.Throttled, 8, "b says nothing but Retry-After: a few 429s teach its limit")
		t.Logf("a: %+v\nb: %+v", sa, sb)
	})
}

// hostMux routes requests to a base transport per host.
type hostMux map[string]http.RoundTripper

func (m hostMux) RoundTrip(r *http.Request) (*http.Response, error) {
	if rt, ok := m[r.URL.Host]; ok {
		return rt.RoundTrip(r)
	}
	closeRequestBody(r)
	return nil, fmt.Errorf("no such host %q", r.URL.Host)
}

func TestRoutesTheServerPutsInOneBucketShareOneLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gh := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: 5000, Window: time.Hour,
			Routes: map[string]int{"/search/": 30}})
		tr := NewTransport(gh.Transport())
		for _, p := range []string{"/repos/a/b", "/search/code", "/users/x", "/search/issues", "/repos/c/d", "/users/y"} {
			mustGet(t, tr, "https://api.github.test"+p)
		}
		st := map[string]Stats{}
		for _, s := range tr.Stats() {
			st[s.Key] = s
		}
		require.Contains(t, st, "https://api.github.test#core")
		require.Contains(t, st, "https://api.github.test#search")
		// The first request of each route goes through the host's own
		// limiter and reveals the route's bucket, whose limiter learns from
		// that response too; later requests wait on the bucket's limiter.
		// (Requests counts the responses a limiter learnt from.)
		assert.EqualValues(t, 3, st["https://api.github.test"].Requests)
		assert.EqualValues(t, 2+2, st["https://api.github.test#core"].Requests, "/repos and /users share core")
		assert.EqualValues(t, 1+1, st["https://api.github.test#search"].Requests)
	})
}

func TestPatternsTheServerPutsInOneBucketShareOneLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := apisim.New(apisim.Config{Style: apisim.StyleDiscord, Limit: 50, Window: time.Second})
		tr := NewTransport(d.Transport(),
			WithEndpoint("discord.test/api/channels/{id}/messages", Inf, 0),
			WithEndpoint("discord.test/api/guilds/{id}", Inf, 0),
			WithEndpoint("discord.test/api/pinned/", 1, 1), // pinned: never rebound
		)
		for range 3 {
			for _, p := range []string{"/api/channels/1/messages", "/api/guilds/2", "/api/pinned/x"} {
				mustGet(t, tr, "https://discord.test"+p)
			}
		}
		var bucket *Stats
		for _, s := range tr.Stats() {
			if len(s.Key) > len("https://discord.test#") && s.Key[:len("https://discord.test#")] == "https://discord.test#" {
				bucket = &s
			}
			if s.Key == "discord.test/api/pinned/" {
				assert.EqualValues(t, 3, s.Requests, "a pinned pattern keeps its own limiter")
			}
		}
		require.NotNil(t, bucket, "a bucket endpoint, keyed by host and the server's bucket id: %v", endpointKeys(tr))
		assert.EqualValues(t, 2+4, bucket.Requests, "both patterns' later requests share the server's bucket, which learnt from their first ones too")
	})
}

func TestBucketNamesAreScopedByKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gh := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: 5000, Window: time.Hour})
		tr := NewTransport(gh.Transport(), WithKeyFunc(func(r *http.Request) string { return "token-" + r.Header.Get("X-Token") }))
		for _, tok := range []string{"1", "2", "1", "2"} {
			r, _ := http.NewRequest(http.MethodGet, "https://api.github.test/repos/a/b", nil)
			r.Header.Set("X-Token", tok)
			resp, err := tr.RoundTrip(r)
			require.NoError(t, err)
			resp.Body.Close()
		}
		assert.Equal(t, []string{"token-1", "token-1#core", "token-2", "token-2#core"}, endpointKeys(tr))
	})
}

// TestEndToEndThroughARealClient sends requests over loopback through an
// http.Client: a POST refused with a 429 is retried with its body replayed,
// and the caller sees only the success; one that meets a 503, which may
// have come after the work began, is returned as it is.
func TestEndToEndThroughARealClient(t *testing.T) {
	var n atomic.Int32
	var first atomic.Int32 // the status of each request's first attempt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := new(bytes.Buffer)
		body.ReadFrom(r.Body)
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(int(first.Load()))
			return
		}
		w.Header().Set("RateLimit", `"default";r=99;t=60`)
		w.Header().Set("RateLimit-Policy", `"default";q=100;w=60`)
		fmt.Fprintf(w, "got %s", body)
	}))
	defer srv.Close()
	tr := NewTransport(nil)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	first.Store(http.StatusTooManyRequests)
	resp, err := client.Post(srv.URL+"/x", "text/plain", bytes.NewReader([]byte("hello")))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a POST the limiter refused is retried")
	assert.Equal(t, "got hello", string(body), "with its body replayed")
	assert.EqualValues(t, 2, n.Load())

	n.Store(0)
	first.Store(http.StatusServiceUnavailable)
	resp, err = client.Post(srv.URL+"/x", "text/plain", bytes.NewReader([]byte("again")))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a POST that met a 503 is not sent twice")
	assert.EqualValues(t, 1, n.Load())
	st := tr.Stats()
	require.Len(t, st, 1)
	assert.EqualValues(t, 1, st[0].Retries)
}

// TestSlowStartBoundsWhatAFanOutOntoAnExhaustedQuotaCosts sends 200
// concurrent requests to an API whose quota another client has spent: at
// most DefaultSlowStart go out before the endpoint's first response, which
// shows the quota spent; the others fail fast (MaxWait) without reaching
// the server.
func TestSlowStartBoundsWhatAFanOutOntoAnExhaustedQuotaCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: 10, Window: time.Hour})
		for range 10 { // someone else spends the quota
			resp, err := api.Transport().RoundTrip(httptest.NewRequest(http.MethodGet, "https://api.github.test/", nil))
			require.NoError(t, err)
			resp.Body.Close()
		}
		tr := NewTransport(api.Transport(), WithMaxWait(time.Minute))
		var wg sync.WaitGroup
		var refused atomic.Int32
		for range 200 {
			wg.Go(func() {
				r, _ := http.NewRequest(http.MethodGet, "https://api.github.test/repos/a/b", nil)
				resp, err := tr.RoundTrip(r)
				if err != nil {
					require.ErrorAs(t, err, new(*RateLimitError))
					refused.Add(1)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
		assert.LessOrEqual(t, api.Stats().Requests, 10+DefaultSlowStart, "at most the slow start's requests reached the server")
		assert.LessOrEqual(t, api.Stats().Throttled, DefaultSlowStart)
		// Those that reached the server got its 429 back (their retry
		// would wait past MaxWait); the others were refused before sending.
		assert.EqualValues(t, 200, int(refused.Load())+api.Stats().Requests-10)
	})
}

func TestEndpointPausedByItsServerSurvivesIdleEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(429, "Retry-After", "3600"), respond(200)))
		tr := NewTransport(m, WithRetry(retry.Policy{Max: retry.None}), WithMaxWait(time.Second))
		mustGet(t, tr, mockURL)
		time.Sleep(idleTTL + time.Minute)
		mustGet(t, tr, "https://other.example.com/") // runs the sweep
		assert.Contains(t, endpointKeys(tr), "https://api.example.com", "its pause is not forgotten")
		r, _ := http.NewRequest(http.MethodGet, mockURL, nil)
		_, err := tr.RoundTrip(r)
		require.ErrorAs(t, err, new(*RateLimitError), "so the next request still waits for it")
		assert.Equal(t, 2, m.GetTotalCallCount(), "the paused endpoint sent nothing more")

		time.Sleep(time.Hour) // the pause is over: now it may go
		mustGet(t, tr, "https://third.example.com/")
		assert.NotContains(t, endpointKeys(tr), "https://api.example.com")
	})
}

func TestWaitBeyondTheContextDeadlineFailsAtOnceWithoutSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(429, "Retry-After", "30"), respond(200)))
		tr := NewTransport(m, WithRetry(retry.Policy{Max: retry.None}))
		mustGet(t, tr, mockURL) // pauses the endpoint for 30 s
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, _ := http.NewRequestWithContext(ctx, http.MethodGet, mockURL, nil)
		start := time.Now()
		_, err := tr.RoundTrip(r)
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, "https://api.example.com", rle.Endpoint)
		assert.Equal(t, 30*time.Second, rle.Info.RetryAfter, "the last Info the server sent")
		assert.Zero(t, time.Since(start), "nothing slept")
		assert.Equal(t, 1, m.GetTotalCallCount())
		st := tr.Stats()
		require.Len(t, st, 1)
		assert.EqualValues(t, 1, st[0].Refused)
	})
}

// TestMaxWaitBoundsTheCallerNotTheServersPause: a short MaxWait refuses
// early, but the endpoint still waits as long as the server asked (up to the
// hostile-header cap), and a long MaxWait raises that cap.
func TestMaxWaitBoundsTheCallerNotTheServersPause(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxWait    time.Duration
		retryAfter string
		want       time.Duration // when the next request could go
	}{
		{"short MaxWait, short pause", 300 * time.Millisecond, "10", 10 * time.Second},
		{"default, a pause past the cap", 0, "7200", DefaultMaxDelay},
		{"long MaxWait, a pause past the default cap", 3 * time.Hour, "7200", 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMock(respondInTurn(respond(429, "Retry-After", tc.retryAfter), respond(200)))
				opts := []Option{WithRetry(retry.Policy{Max: retry.None})}
				if tc.maxWait > 0 {
					opts = append(opts, WithMaxWait(tc.maxWait))
				}
				tr := NewTransport(m, opts...)
				start := time.Now()
				mustGet(t, tr, mockURL) // the 429, returned: its retry would wait too long
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				defer cancel()
				r, _ := http.NewRequestWithContext(ctx, http.MethodGet, mockURL, nil)
				_, err := tr.RoundTrip(r)
				var rle *RateLimitError
				require.ErrorAs(t, err, &rle)
				// The server's pause, capped at the longer of MaxWait and
				// DefaultMaxDelay; the limiter may add its spacing after it.
				got := rle.RetryAt.Sub(start)
				assert.GreaterOrEqual(t, got, tc.want)
				assert.Less(t, got, tc.want+time.Second)
				assert.Equal(t, 1, m.GetTotalCallCount())
			})
		})
	}
}

// TestCostHintsKeepATokenQuotaFromBeingOverrun sends LLM-style requests
// whose token quota binds long before the request quota: with
// work.WithCost the limiter holds each request until the quota can cover
// it.
func TestCostHintsKeepATokenQuotaFromBeingOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := apisim.New(apisim.Config{Style: apisim.StyleOpenAI, Limit: 1000, TokenLimit: 20000, Window: time.Minute})
		tr := NewTransport(api.Transport())
		start := time.Now()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 20 {
					ctx := work.WithCost(context.Background(), 1000)
					r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.openai.test/v1/chat/completions", bytes.NewReader([]byte("{}")))
					r.Header.Set(apisim.TokensHeader, "1000")
					resp, err := tr.RoundTrip(r)
					if assert.NoError(t, err) {
						resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
		st := api.Stats()
		assert.Equal(t, 80, st.OK)
		assert.LessOrEqual(t, st.Throttled, 2)
		assert.GreaterOrEqual(t, time.Since(start), 3*time.Minute, "80 000 tokens at 20 000 a minute")
		t.Logf("%+v in %v", st, time.Since(start))
	})
}

// TestClientTimeoutIsADeadlineTheLimiterRespects: http.Client.Timeout puts a
// deadline on the request's context, so a paused endpoint fails at once
// through the client too, as a *RateLimitError inside the *url.Error.
func TestClientTimeoutIsADeadlineTheLimiterRespects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(429, "Retry-After", "60"), respond(200)))
		client := &http.Client{Transport: NewTransport(m, WithRetry(retry.Policy{Max: retry.None})), Timeout: 5 * time.Second}
		resp, err := client.Get(mockURL)
		require.NoError(t, err)
		resp.Body.Close()
		start := time.Now()
		_, err = client.Get(mockURL)
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, 1, m.GetTotalCallCount())
	})
}

func TestRouteTheServerMovesToAnotherBucketFollowsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(
			respond(200, "X-RateLimit-Bucket", "x"),
			respond(200, "X-RateLimit-Bucket", "x"),
			respond(429, "X-RateLimit-Bucket", "y", "Retry-After", "30"),
			respond(200, "X-RateLimit-Bucket", "y"),
		))
		tr := NewTransport(m, WithRetry(retry.Policy{Max: retry.None}), WithMaxWait(time.Second))
		mustGet(t, tr, mockURL) // through the host's limiter: reveals x
		mustGet(t, tr, mockURL) // through x's
		resp := mustGet(t, tr, mockURL)
		require.Equal(t, 429, resp.StatusCode, "through x's limiter, but the server says y")

		r, _ := http.NewRequest(http.MethodGet, mockURL, nil)
		_, err := tr.RoundTrip(r)
		var rle *RateLimitError
		require.ErrorAs(t, err, &rle, "the route now waits on y, which learnt the pause")
		assert.Equal(t, "https://api.example.com#y", rle.Endpoint)
		assert.Equal(t, 3, m.GetTotalCallCount())

		st := map[string]Stats{}
		for _, s := range tr.Stats() {
			st[s.Key] = s
		}
		assert.Zero(t, st["https://api.example.com#x"].Throttled, "y's 429 is not held against x")
		assert.True(t, st["https://api.example.com#x"].PausedUntil.IsZero())
		assert.EqualValues(t, 1, st["https://api.example.com#y"].Throttled)
	})
}
