package integrations_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"
)

// provider is the rate-limit dialect a fake speaks: the header names and
// formats, the status of a throttled response and its body are the ones the
// provider documents (and its SDK parses).
type provider int

const (
	gitHub       provider = iota // X-RateLimit-*, reset in epoch seconds, 403 + message body
	openAI                       // x-ratelimit-*-{requests,tokens}, resets as durations ("1s", "250ms")
	anthropicAPI                 // anthropic-ratelimit-{requests,tokens}-*, resets in RFC 3339, retry-after
	generic                      // X-RateLimit-* and a 429 with Retry-After, for retryablehttp
)

// fake is an in-memory provider with a fixed-window quota of limit requests
// (and tokenLimit tokens, when set) per window. Windows start on whole
// seconds of the clock, as GitHub's epoch-second resets require; inside a
// synctest bubble the clock starts on a whole second, so the first window is
// a full one and the quota-bound minimum of a job is exact.
//
// Tokens are charged from the request body's max_tokens or
// max_completion_tokens, as the LLM providers count an estimate up front.
type fake struct {
	provider   provider
	limit      int
	tokenLimit int           // 0: no token quota
	window     time.Duration // a whole number of seconds
	latency    time.Duration // time a request spends "on the server"

	// storm answers every request before stormUntil (measured from the first
	// request) with a 429 and Retry-After: 1, to count how many requests one
	// call can turn into when two layers retry.
	storm time.Duration
	// secondary makes the storm GitHub's secondary rate limit: 403 with
	// Retry-After and the secondary-limit body, the primary quota untouched.
	secondary bool
	// shouldRetry, when set, is sent as x-should-retry on throttled responses.
	shouldRetry string
	// overloadedEvery answers every n-th request with Anthropic's 529.
	overloadedEvery int

	mu        sync.Mutex
	first     time.Time
	win       int64
	used      int
	usedTok   int
	requests  int // every request that reached the server
	throttled int // 429s and rate-limit 403s
	lateThrot int // throttled after the first response had gone out
	overload  int // 529s
	answered  bool
}

// stats is what the server saw.
type stats struct{ requests, throttled, throttledAfterFirst, overloaded int }

func (f *fake) stats() stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return stats{f.requests, f.throttled, f.lateThrot, f.overload}
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil { // a client's GET may carry a nil Body
		body, _ = io.ReadAll(r.Body)
	}
	var est struct {
		MaxTokens           int `json:"max_tokens"`
		MaxCompletionTokens int `json:"max_completion_tokens"`
	}
	_ = json.Unmarshal(body, &est)
	tokens := est.MaxTokens + est.MaxCompletionTokens

	time.Sleep(f.latency / 2) // the request travels
	now := time.Now()
	f.mu.Lock()
	if f.first.IsZero() {
		f.first = now
	}
	f.requests++
	n := f.requests
	win := now.Unix() / int64(f.window/time.Second)
	if win != f.win {
		f.win, f.used, f.usedTok = win, 0, 0
	}
	reset := time.Unix((win+1)*int64(f.window/time.Second), 0)
	storming := now.Before(f.first.Add(f.storm))
	overloaded := f.overloadedEvery > 0 && n%f.overloadedEvery == 0
	ok := !storming && !overloaded && f.used < f.limit && (f.tokenLimit == 0 || f.usedTok+tokens <= f.tokenLimit)
	if ok {
		f.used++
		f.usedTok += tokens
	} else if overloaded {
		f.overload++
	} else {
		f.throttled++
		if f.answered {
			f.lateThrot++
		}
	}
	remaining, remainingTok := f.limit-f.used, f.tokenLimit-f.usedTok
	if storming && !f.secondary {
		// Another client of the same account has spent the quota.
		remaining, remainingTok = 0, 0
	}
	f.mu.Unlock()

	time.Sleep(f.latency / 2) // the response travels
	h := w.Header()
	h.Set("Content-Type", "application/json")
	f.headers(h, remaining, remainingTok, reset, now)
	switch {
	case ok:
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, f.success(r, n))
	case overloaded:
		w.WriteHeader(529)
		io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	default:
		if f.shouldRetry != "" {
			h.Set("x-should-retry", f.shouldRetry)
		}
		after := max(1, int(reset.Sub(now).Round(time.Second)/time.Second))
		if storming {
			after = 1
		}
		if storming && f.secondary {
			h.Set("Retry-After", "1")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`)
		} else {
			f.throttle(w, after)
		}
	}
	f.mu.Lock()
	f.answered = true
	f.mu.Unlock()
}

// headers writes the provider's rate-limit headers.
func (f *fake) headers(h http.Header, remaining, remainingTok int, reset, now time.Time) {
	switch f.provider {
	case gitHub, generic:
		h.Set("X-RateLimit-Limit", strconv.Itoa(f.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Used", strconv.Itoa(f.limit-remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		if f.provider == gitHub {
			h.Set("X-RateLimit-Resource", "core")
		}
	case openAI:
		// OpenAI writes resets as Go-like durations: "1s", "6m0s", "120ms".
		h.Set("x-ratelimit-limit-requests", strconv.Itoa(f.limit))
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(remaining))
		h.Set("x-ratelimit-reset-requests", reset.Sub(now).String())
		if f.tokenLimit > 0 {
			h.Set("x-ratelimit-limit-tokens", strconv.Itoa(f.tokenLimit))
			h.Set("x-ratelimit-remaining-tokens", strconv.Itoa(remainingTok))
			h.Set("x-ratelimit-reset-tokens", reset.Sub(now).String())
		}
	case anthropicAPI:
		r := reset.UTC().Format(time.RFC3339)
		h.Set("anthropic-ratelimit-requests-limit", strconv.Itoa(f.limit))
		h.Set("anthropic-ratelimit-requests-remaining", strconv.Itoa(remaining))
		h.Set("anthropic-ratelimit-requests-reset", r)
		if f.tokenLimit > 0 {
			h.Set("anthropic-ratelimit-tokens-limit", strconv.Itoa(f.tokenLimit))
			h.Set("anthropic-ratelimit-tokens-remaining", strconv.Itoa(remainingTok))
			h.Set("anthropic-ratelimit-tokens-reset", r)
		}
	}
}

// throttle writes the provider's throttled response.
func (f *fake) throttle(w http.ResponseWriter, retryAfter int) {
	switch f.provider {
	case gitHub:
		// GitHub answers an exhausted primary quota with 403 (sometimes 429)
		// and this body; go-github turns it into *github.RateLimitError.
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
	case openAI:
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-fake on requests per min (RPM): Limit %d, Used %d, Requested 1. Please try again in %ds.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			f.limit, f.limit, retryAfter)
	case anthropicAPI:
		w.Header().Set("retry-after", strconv.Itoa(retryAfter))
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of requests per minute."}}`)
	case generic:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"rate limit exceeded"}`)
	}
}

// success is the provider's body for a call that went through.
func (f *fake) success(r *http.Request, n int) string {
	switch f.provider {
	case gitHub:
		return fmt.Sprintf(`{"number":%d,"title":"issue %d","state":"open"}`, n, n)
	case openAI:
		return fmt.Sprintf(`{"id":"chatcmpl-%d","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`, n)
	case anthropicAPI:
		return fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}`, n)
	default:
		return `{"ok":true}`
	}
}

// inMemory is a RoundTripper that serves requests with a handler, without a
// socket, so a whole fan-out runs on synctest's clock.
type inMemory struct{ h http.Handler }

func (t inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	if r.Body != nil {
		r.Body.Close()
	}
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
