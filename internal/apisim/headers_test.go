package apisim

import (
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under synctest the clock starts at 2000-01-01T00:00:00Z = epoch 946684800,
// so the first one-minute window ends at 946684860.

func TestHeadersOfASuccessfulResponseMatchEachProvidersFormat(t *testing.T) {
	tests := []struct {
		style Style
		want  http.Header
	}{
		{StyleGitHub, http.Header{
			"X-Ratelimit-Limit":     {"60"},
			"X-Ratelimit-Remaining": {"59"},
			"X-Ratelimit-Reset":     {"946684860"},
			"X-Ratelimit-Used":      {"1"},
			"X-Ratelimit-Resource":  {"core"},
		}},
		{StyleIETF, http.Header{
			"Ratelimit":        {`"default";r=59;t=40`},
			"Ratelimit-Policy": {`"default";q=60;w=60`},
		}},
		{StyleIETF07, http.Header{
			"Ratelimit":        {"limit=60, remaining=59, reset=40"},
			"Ratelimit-Policy": {"60;w=60"},
		}},
		{StyleOpenAI, http.Header{
			"X-Ratelimit-Limit-Requests":     {"60"},
			"X-Ratelimit-Remaining-Requests": {"59"},
			"X-Ratelimit-Reset-Requests":     {"39.5s"},
			"X-Ratelimit-Limit-Tokens":       {"10000"},
			"X-Ratelimit-Remaining-Tokens":   {"8700"},
			"X-Ratelimit-Reset-Tokens":       {"39.5s"},
		}},
		{StyleAnthropic, http.Header{
			"Anthropic-Ratelimit-Requests-Limit":     {"60"},
			"Anthropic-Ratelimit-Requests-Remaining": {"59"},
			"Anthropic-Ratelimit-Requests-Reset":     {"2000-01-01T00:01:00Z"},
			"Anthropic-Ratelimit-Tokens-Limit":       {"10000"},
			"Anthropic-Ratelimit-Tokens-Remaining":   {"9000"}, // 8700 to the nearest thousand
			"Anthropic-Ratelimit-Tokens-Reset":       {"2000-01-01T00:01:00Z"},
		}},
		{StyleDiscord, http.Header{
			"X-Ratelimit-Limit":       {"60"},
			"X-Ratelimit-Remaining":   {"59"},
			"X-Ratelimit-Reset":       {"946684860.000"},
			"X-Ratelimit-Reset-After": {"39.500"},
			"X-Ratelimit-Bucket":      {"933b5bde"},
		}},
		{StyleShopify, http.Header{ // a token bucket of 60, full before this request
			"X-Shopify-Shop-Api-Call-Limit": {"1/60"},
		}},
		{StyleX, http.Header{
			"X-Rate-Limit-Limit":     {"60"},
			"X-Rate-Limit-Remaining": {"59"},
			"X-Rate-Limit-Reset":     {"946684860"},
		}},
		{StyleReddit, http.Header{ // 39.5 s to the window's end, from half a second later
			"X-Ratelimit-Used":      {"1"},
			"X-Ratelimit-Remaining": {"59.0"},
			"X-Ratelimit-Reset":     {"40"},
		}},
		{StyleMastodon, http.Header{ // the window's end plus the request's fraction of a second
			"X-Ratelimit-Limit":     {"60"},
			"X-Ratelimit-Remaining": {"59"},
			"X-Ratelimit-Reset":     {"2000-01-01T00:01:00.500000Z"},
		}},
		{StyleGitLab, http.Header{ // Date + 60 s; 2000-01-02 was a Sunday
			"Ratelimit-Limit":     {"60"},
			"Ratelimit-Observed":  {"1"},
			"Ratelimit-Remaining": {"59"},
			"Ratelimit-Reset":     {"946684880"},
			"Ratelimit-Resettime": {"Sun, 01 Jan 2000 00:01:20 GMT"},
		}},
		{StyleRetryAfter, http.Header{}},
		{StyleBare, http.Header{}},
	}
	require.Len(t, tests, len(Styles()), "every style has a golden case")
	for _, tt := range tests {
		t.Run(string(tt.style), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Style: tt.style, Limit: 60, Window: time.Minute, TokenLimit: 10000})
				time.Sleep(20500 * time.Millisecond)
				resp := get(t, s, "/v1/things", 1300)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				tt.want.Set("Content-Type", "application/json")
				tt.want.Set("Date", "Sat, 01 Jan 2000 00:00:20 GMT") // the server's clock, whole seconds
				assert.Equal(t, tt.want, resp.Header)
			})
		})
	}
}

func TestHeadersOfA429ShowNothingRemainingAndWhenToRetry(t *testing.T) {
	tests := []struct {
		style Style
		want  http.Header
	}{
		{StyleGitHub, http.Header{ // primary limit: no Retry-After, as GitHub does
			"X-Ratelimit-Limit":     {"2"},
			"X-Ratelimit-Remaining": {"0"},
			"X-Ratelimit-Reset":     {"946684860"},
			"X-Ratelimit-Used":      {"2"},
			"X-Ratelimit-Resource":  {"core"},
		}},
		{StyleIETF, http.Header{
			"Ratelimit":        {`"default";r=0;t=40`},
			"Ratelimit-Policy": {`"default";q=2;w=60`},
			"Retry-After":      {"40"},
		}},
		{StyleIETF07, http.Header{
			"Ratelimit":        {"limit=2, remaining=0, reset=40"},
			"Ratelimit-Policy": {"2;w=60"},
			"Retry-After":      {"40"},
		}},
		{StyleOpenAI, http.Header{
			"X-Ratelimit-Limit-Requests":     {"2"},
			"X-Ratelimit-Remaining-Requests": {"0"},
			"X-Ratelimit-Reset-Requests":     {"39.5s"},
			"X-Ratelimit-Limit-Tokens":       {"10000"},
			"X-Ratelimit-Remaining-Tokens":   {"7400"},
			"X-Ratelimit-Reset-Tokens":       {"39.5s"},
			"Retry-After":                    {"40"},
		}},
		{StyleAnthropic, http.Header{
			"Anthropic-Ratelimit-Requests-Limit":     {"2"},
			"Anthropic-Ratelimit-Requests-Remaining": {"0"},
			"Anthropic-Ratelimit-Requests-Reset":     {"2000-01-01T00:01:00Z"},
			"Anthropic-Ratelimit-Tokens-Limit":       {"10000"},
			"Anthropic-Ratelimit-Tokens-Remaining":   {"7000"},
			"Anthropic-Ratelimit-Tokens-Reset":       {"2000-01-01T00:01:00Z"},
			"Retry-After":                            {"40"},
		}},
		{StyleDiscord, http.Header{
			"X-Ratelimit-Limit":       {"2"},
			"X-Ratelimit-Remaining":   {"0"},
			"X-Ratelimit-Reset":       {"946684860.000"},
			"X-Ratelimit-Reset-After": {"39.500"},
			"X-Ratelimit-Bucket":      {"933b5bde"},
			"X-Ratelimit-Scope":       {"user"},
			"Retry-After":             {"40"},
		}},
		// A leaky bucket of 2 draining 2/min holds 0.68 free after 20.5 s; one
		// more request fits 9.5 s later.
		{StyleShopify, http.Header{
			"X-Shopify-Shop-Api-Call-Limit": {"2/2"},
			"Retry-After":                   {"10.0"},
		}},
		{StyleX, http.Header{ // as X does: the reset, no Retry-After
			"X-Rate-Limit-Limit":     {"2"},
			"X-Rate-Limit-Remaining": {"0"},
			"X-Rate-Limit-Reset":     {"946684860"},
		}},
		{StyleReddit, http.Header{ // as praw's logs show: no Retry-After
			"X-Ratelimit-Used":      {"2"},
			"X-Ratelimit-Remaining": {"0.0"},
			"X-Ratelimit-Reset":     {"40"},
		}},
		{StyleMastodon, http.Header{ // Mastodon's throttled responder: no Retry-After
			"X-Ratelimit-Limit":     {"2"},
			"X-Ratelimit-Remaining": {"0"},
			"X-Ratelimit-Reset":     {"2000-01-01T00:01:00.500000Z"},
		}},
		{StyleGitLab, http.Header{
			"Ratelimit-Limit":     {"2"},
			"Ratelimit-Observed":  {"2"},
			"Ratelimit-Remaining": {"0"},
			"Ratelimit-Reset":     {"946684880"},
			"Ratelimit-Resettime": {"Sun, 01 Jan 2000 00:01:20 GMT"},
			"Retry-After":         {"40"},
			"Content-Type":        {"text/plain"},
		}},
		{StyleRetryAfter, http.Header{"Retry-After": {"40"}}},
		{StyleBare, http.Header{}},
	}
	require.Len(t, tests, len(Styles()), "every style has a golden case")
	for _, tt := range tests {
		t.Run(string(tt.style), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Style: tt.style, Limit: 2, Window: time.Minute, TokenLimit: 10000})
				get(t, s, "/", 1300)
				get(t, s, "/", 1300)
				time.Sleep(20500 * time.Millisecond)
				resp := get(t, s, "/", 1300)
				require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
				if tt.want.Get("Content-Type") == "" {
					tt.want.Set("Content-Type", "application/json")
				}
				tt.want.Set("Date", "Sat, 01 Jan 2000 00:00:20 GMT") // the server's clock, whole seconds
				assert.Equal(t, tt.want, resp.Header)
			})
		})
	}
}

func TestDiscord429BodyCarriesTheExactRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleDiscord, Limit: 1, Window: time.Minute})
		get(t, s, "/", 0)
		time.Sleep(20500 * time.Millisecond)
		body := getBody(t, s, "/")
		assert.JSONEq(t, `{"message":"You are being rate limited.","retry_after":39.5,"global":false}`, body)
	})
}

func TestHeadersNameEachRoutesBucket(t *testing.T) {
	tests := []struct {
		style  Style
		header string
		shared string
		route  string
	}{
		{StyleGitHub, "X-Ratelimit-Resource", "core", "search"},
		{StyleIETF, "Ratelimit-Policy", `"default";q=10;w=60`, `"search";q=2;w=60`},
		{StyleDiscord, "X-Ratelimit-Bucket", "933b5bde", "803328a9"},
	}
	for _, tt := range tests {
		t.Run(string(tt.style), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Style: tt.style, Limit: 10, Window: time.Minute, Routes: map[string]int{"/search/": 2}})
				assert.Equal(t, tt.shared, get(t, s, "/repos/x", 0).Header.Get(tt.header))
				assert.Equal(t, tt.route, get(t, s, "/search/code", 0).Header.Get(tt.header))
			})
		})
	}
}

func TestSlidingWindowAndTokenBucketReportTheirOwnResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sliding := New(Config{Style: StyleIETF07, Algorithm: SlidingWindow, Limit: 10, Window: time.Minute})
		bucket := New(Config{Style: StyleIETF07, Algorithm: TokenBucket, Limit: 10, Window: time.Minute})
		time.Sleep(90 * time.Second)
		// Sliding: the end of the current fixed window (120 s), like go-chi/httprate.
		assert.Equal(t, "limit=10, remaining=9, reset=30", get(t, sliding, "/", 0).Header.Get("RateLimit"))
		// Token bucket: full again once the one token taken has refilled (6 s).
		assert.Equal(t, "limit=10, remaining=9, reset=6", get(t, bucket, "/", 0).Header.Get("RateLimit"))
	})
}

func TestOpenAIDurationsLookLikeOpenAIs(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{time.Second, "1s"},
		{6 * time.Minute, "6m0s"},
		{20 * time.Millisecond, "20ms"},
		{11500 * time.Microsecond, "12ms"}, // rounded up, never early
		{2*time.Minute + 59560*time.Millisecond, "2m59.56s"},
		{2*time.Minute + 59561*time.Millisecond, "2m59.57s"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, openAIDuration(tt.in), "openAIDuration(%v)", tt.in)
	}
}

func TestInstantsAreRoundedUpSoClientsAreNeverEarly(t *testing.T) {
	at := time.Date(2025, 8, 21, 12, 40, 58, 1, time.UTC)
	assert.Equal(t, "2025-08-21T12:40:59Z", rfc3339Ceil(at))
	assert.Equal(t, int64(1755780059), ceilUnix(at))
	assert.Equal(t, int64(1755780058), ceilUnix(at.Truncate(time.Second)))
	assert.Equal(t, 64.57, ceilMillis(64.5691))
	assert.Equal(t, 64.57, ceilMillis(64.57))
	assert.Equal(t, int64(2), ceilSeconds(1001*time.Millisecond))
	assert.Equal(t, int64(0), ceilSeconds(-time.Second))
}

// Anthropic's input and output token limits: each quota counts its own
// tokens from the request's headers, is stated under its own name, and a
// request over either is refused.
func TestInputAndOutputTokenQuotasAreCountedApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleAnthropic, Limit: 60, Window: time.Minute,
			InputTokenLimit: 10000, OutputTokenLimit: 2000})
		do := func(in, out int) *http.Response {
			req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/messages", nil)
			req.Header.Set(InputTokensHeader, strconv.Itoa(in))
			req.Header.Set(OutputTokensHeader, strconv.Itoa(out))
			resp, err := s.Transport().RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp
		}
		resp := do(4000, 1500)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "6000", resp.Header.Get("Anthropic-Ratelimit-Input-Tokens-Remaining"))
		assert.Equal(t, "10000", resp.Header.Get("Anthropic-Ratelimit-Input-Tokens-Limit"))
		assert.Equal(t, "1000", resp.Header.Get("Anthropic-Ratelimit-Output-Tokens-Remaining")) // 500, to the nearest thousand
		assert.NotEmpty(t, resp.Header.Get("Anthropic-Ratelimit-Output-Tokens-Reset"))
		assert.Empty(t, resp.Header.Get("Anthropic-Ratelimit-Tokens-Limit"), "no combined token quota configured")

		resp = do(1000, 600) // the input fits, the output does not
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		st := s.Stats()
		assert.Equal(t, 4000, st.InputTokensUsed)
		assert.Equal(t, 1500, st.OutputTokensUsed)
		assert.Equal(t, 5500, st.TokensUsed, "with no X-Apisim-Tokens, the sum")
		now := time.Now()
		assert.InDelta(t, 10000, s.InputTokenCapacity(now, now.Add(time.Minute)), 1e-6)
		assert.InDelta(t, 2000, s.OutputTokenCapacity(now, now.Add(time.Minute)), 1e-6)
	})
}

// Reddit's reset jitters by a second between answers of one window, as its
// recorded sessions do (432 then 431 in one Date second): Date + reset is
// the window's end or the second after it, never before.
func TestRedditResetIsTheWindowsEndOrTheSecondAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleReddit, Limit: 600, Window: 10 * time.Minute})
		time.Sleep(7*time.Minute + 11*time.Second + 200*time.Millisecond)
		early := get(t, s, "/api/x", 0)
		time.Sleep(500 * time.Millisecond)
		late := get(t, s, "/api/x", 0)
		assert.Equal(t, early.Header.Get("Date"), late.Header.Get("Date"), "one Date second")
		assert.Equal(t, "170", early.Header.Get("X-Ratelimit-Reset"), "00:07:11 + 170 s = 00:10:00 + 1 s")
		assert.Equal(t, "169", late.Header.Get("X-Ratelimit-Reset"), "00:07:11 + 169 s = 00:10:00")
		assert.Equal(t, "598.0", late.Header.Get("X-Ratelimit-Remaining"))
		assert.Equal(t, "2", late.Header.Get("X-Ratelimit-Used"))
		assert.Empty(t, late.Header.Get("X-Ratelimit-Limit"), "Reddit states no limit: it is used + remaining")
	})
	assert.Equal(t, int64(0), redditReset(0))
	assert.Equal(t, int64(1), redditReset(time.Nanosecond))
	assert.Equal(t, int64(2), redditReset(time.Second))
}

// Mastodon's reset carries the request's own microseconds: two answers of
// one window state different instants, neither before the window's end.
func TestMastodonResetCarriesTheRequestsFraction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleMastodon, Limit: 300, Window: 5 * time.Minute,
			Routes: map[string]int{"/api/v2/media": 30}})
		time.Sleep(3*time.Minute + 730654*time.Microsecond)
		assert.Equal(t, "2000-01-01T00:05:00.730654Z", get(t, s, "/api/v1/statuses", 0).Header.Get("X-Ratelimit-Reset"))
		time.Sleep(60250 * time.Microsecond)
		resp := get(t, s, "/api/v2/media", 0)
		assert.Equal(t, "2000-01-01T00:05:00.790904Z", resp.Header.Get("X-Ratelimit-Reset"))
		assert.Equal(t, "30", resp.Header.Get("X-Ratelimit-Limit"), "the media family's quota, named nowhere")
		assert.Equal(t, "29", resp.Header.Get("X-Ratelimit-Remaining"))
	})
}

// gitlab.com restated its reset as Date + 60 s on every answer while the
// count it observed went up (its recorded sessions of 2018 and 2019).
func TestGitLabRestatesItsResetOnEveryAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleGitLab, Limit: 600, Window: time.Minute})
		var resets, observed []string
		for range 3 {
			resp := get(t, s, "/api/v4/projects", 0)
			resets = append(resets, resp.Header.Get("Ratelimit-Reset"))
			observed = append(observed, resp.Header.Get("Ratelimit-Observed"))
			time.Sleep(1300 * time.Millisecond)
		}
		assert.Equal(t, []string{"946684860", "946684861", "946684862"}, resets)
		assert.Equal(t, []string{"1", "2", "3"}, observed)
	})
}

// Anthropic's API and Hugging Face's router send Retry-After on successes
// (recorded: 20, 30, 31 s); a refusal keeps its own.
func TestRetryAfterOnSuccessIsSentOnEvery2xx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, style := range []Style{StyleAnthropic, StyleBare} {
			s := New(Config{Style: style, Limit: 2, Window: time.Minute, RetryAfterOnSuccess: 30500 * time.Millisecond})
			for range 2 {
				resp := get(t, s, "/v1/messages", 0)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, "31", resp.Header.Get("Retry-After"), "%s: whole seconds, rounded up", style)
			}
			time.Sleep(20500 * time.Millisecond)
			resp := get(t, s, "/v1/messages", 0)
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			want := map[Style]string{StyleAnthropic: "40", StyleBare: ""}[style]
			assert.Equal(t, want, resp.Header.Get("Retry-After"), "%s: the refusal's own", style)
			time.Sleep(time.Minute)
		}
	})
}
