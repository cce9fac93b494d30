package integrations_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
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

// fake is an in-memory provider. Its request quota is a fixed window of
// limit requests per window. Windows start on whole seconds of the clock, as
// GitHub's epoch-second resets require; inside a synctest bubble the clock
// starts on a whole second, so the first window is a full one and the
// quota-bound minimum of a job is exact.
//
// The LLM providers (openAI, anthropicAPI) may also count tokens, as their
// APIs do: in token buckets that hold tokenWindow's worth (a minute's, as
// their per-minute limits) and refill continuously, whose stated reset is
// the time until the bucket is full again. A request is charged on arrival
// what its body asks for: its prompt (a token per 4 characters, the
// providers' estimate) and its max_tokens or max_completion_tokens in full.
// OpenAI counts both in one tokens quota; Anthropic counts the prompt in its
// input-tokens quota and max_tokens in its output-tokens quota (it charges
// max_tokens up front and trues it up at the end of the request; the fake
// does not true up: its completions always use max_tokens), and states the
// more restrictive of the two as its tokens quota.
type fake struct {
	provider provider
	limit    int
	window   time.Duration // a whole number of seconds
	latency  time.Duration // time a request spends "on the server"

	// tokenLimit is the token quota per tokenWindow (0: none): OpenAI's
	// tokens, Anthropic's input tokens.
	tokenLimit int
	// outputLimit is Anthropic's output-tokens quota per tokenWindow (0:
	// none).
	outputLimit int
	// tokenWindow is how long an empty token bucket takes to fill; a
	// minute when 0.
	tokenWindow time.Duration

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
	tok, out  bucket // the token quotas, when set
	requests  int    // every request that reached the server
	throttled int    // 429s and rate-limit 403s
	lateThrot int    // throttled after the first response had gone out
	overload  int    // 529s
	answered  bool
	arrivals  []arrival
}

// arrival is one request as the server saw it.
type arrival struct {
	at                time.Time
	throttled         bool
	tokens, outTokens int // charged to the token quotas (0 when refused)
}

// stats is what the server saw.
type stats struct{ requests, throttled, throttledAfterFirst, overloaded int }

func (f *fake) stats() stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return stats{f.requests, f.throttled, f.lateThrot, f.overload}
}

// log is every request the server saw, in order of arrival.
func (f *fake) log() []arrival {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.arrivals)
}

// bucket is a token bucket of limit tokens refilled at limit per period,
// full when first used.
type bucket struct {
	limit  float64 // 0: no such quota
	period time.Duration
	level  float64
	at     time.Time
}

func (b *bucket) on() bool { return b.limit > 0 }

// fill brings the bucket to now.
func (b *bucket) fill(now time.Time) {
	if b.at.IsZero() {
		b.level, b.at = b.limit, now
		return
	}
	if now.After(b.at) {
		b.level = min(b.limit, b.level+b.limit*float64(now.Sub(b.at))/float64(b.period))
		b.at = now
	}
}

// until is how long the bucket takes to hold n tokens (0 if it does).
func (b *bucket) until(n float64) time.Duration {
	if n <= b.level {
		return 0
	}
	return time.Duration(math.Ceil((n - b.level) / b.limit * float64(b.period)))
}

// remaining is what the bucket holds, in whole tokens.
func (b *bucket) remaining() int { return int(math.Floor(b.level)) }

// quotaState is one token quota's figures at a request's arrival.
type quotaState struct {
	limit, remaining int
	toFull           time.Duration // until the bucket is full again
}

func (b *bucket) state() quotaState {
	return quotaState{int(b.limit), max(0, b.remaining()), b.until(b.limit)}
}

// llmRequest is what the fake reads of a chat completion's or a message's
// body.
type llmRequest struct {
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
	Messages            []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// promptTokens is the prompt's size as the providers estimate it for their
// rate limits before counting: a token per 4 characters.
func (r llmRequest) promptTokens() int {
	chars := 0
	for _, m := range r.Messages {
		var text string
		if json.Unmarshal(m.Content, &text) == nil { // OpenAI: a string
			chars += len(text)
			continue
		}
		var blocks []struct { // Anthropic: content blocks
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &blocks) == nil {
			for _, b := range blocks {
				chars += len(b.Text)
			}
		}
	}
	return (chars + 3) / 4
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil { // a client's GET may carry a nil Body
		body, _ = io.ReadAll(r.Body)
	}
	var req llmRequest
	_ = json.Unmarshal(body, &req)
	// What the request costs each token quota.
	var tokCost, outCost int
	switch f.provider {
	case openAI:
		tokCost = req.promptTokens() + req.MaxTokens + req.MaxCompletionTokens
	case anthropicAPI:
		tokCost, outCost = req.promptTokens(), req.MaxTokens
	}

	time.Sleep(f.latency / 2) // the request travels
	now := time.Now()
	f.mu.Lock()
	if f.first.IsZero() {
		f.first = now
		period := cmp.Or(f.tokenWindow, time.Minute)
		f.tok = bucket{limit: float64(f.tokenLimit), period: period}
		f.out = bucket{limit: float64(f.outputLimit), period: period}
	}
	f.requests++
	n := f.requests
	win := now.Unix() / int64(f.window/time.Second)
	if win != f.win {
		f.win, f.used = win, 0
	}
	reset := time.Unix((win+1)*int64(f.window/time.Second), 0)
	storming := now.Before(f.first.Add(f.storm))
	overloaded := f.overloadedEvery > 0 && n%f.overloadedEvery == 0
	// When a refused request could go: the request quota's reset, or when
	// the token buckets hold its cost.
	var wait time.Duration
	refusedBy := "" // the quota that refused it, as the provider's message names it
	if f.used >= f.limit {
		wait, refusedBy = reset.Sub(now), "requests"
	}
	for _, q := range []struct {
		b    *bucket
		cost int
		name string
	}{{&f.tok, tokCost, "tokens"}, {&f.out, outCost, "output tokens"}} {
		if !q.b.on() {
			continue
		}
		q.b.fill(now)
		if d := q.b.until(float64(q.cost)); d > wait {
			wait, refusedBy = d, q.name
		}
	}
	if f.provider == anthropicAPI && refusedBy == "tokens" {
		refusedBy = "input tokens"
	}
	if storming {
		refusedBy = "requests"
	}
	ok := !storming && !overloaded && wait == 0
	a := arrival{at: now, throttled: !ok && !overloaded}
	if ok {
		f.used++
		if f.tok.on() {
			f.tok.level -= float64(tokCost)
			a.tokens = tokCost
		}
		if f.out.on() {
			f.out.level -= float64(outCost)
			a.outTokens = outCost
		}
	} else if overloaded {
		f.overload++
	} else {
		f.throttled++
		if f.answered {
			f.lateThrot++
		}
	}
	f.arrivals = append(f.arrivals, a)
	remaining := f.limit - f.used
	tok, out := f.tok.state(), f.out.state()
	if storming && !f.secondary {
		// Another client of the same account has spent the quota.
		remaining, tok.remaining, out.remaining = 0, 0, 0
	}
	f.mu.Unlock()

	time.Sleep(f.latency / 2) // the response travels
	h := w.Header()
	h.Set("Content-Type", "application/json")
	f.headers(h, remaining, reset, tok, out, now)
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
		after := max(1, int(math.Ceil(wait.Seconds())))
		if storming {
			after = 1
		}
		if storming && f.secondary {
			h.Set("Retry-After", "1")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`)
		} else {
			f.throttle(w, after, refusedBy, tokCost, tok)
		}
	}
	f.mu.Lock()
	f.answered = true
	f.mu.Unlock()
}

// headers writes the provider's rate-limit headers: the request quota's,
// and the token quotas' when the fake has them.
func (f *fake) headers(h http.Header, remaining int, reset time.Time, tok, out quotaState, now time.Time) {
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
		// OpenAI writes its resets as Go durations ("1s", "6m0s",
		// "4m12.172s", "120ms"), a token quota's as the time until the
		// bucket is full again.
		h.Set("x-ratelimit-limit-requests", strconv.Itoa(f.limit))
		h.Set("x-ratelimit-remaining-requests", strconv.Itoa(remaining))
		h.Set("x-ratelimit-reset-requests", openAIDuration(reset.Sub(now)))
		if f.tokenLimit > 0 {
			h.Set("x-ratelimit-limit-tokens", strconv.Itoa(tok.limit))
			h.Set("x-ratelimit-remaining-tokens", strconv.Itoa(tok.remaining))
			h.Set("x-ratelimit-reset-tokens", openAIDuration(tok.toFull))
		}
	case anthropicAPI:
		// Anthropic writes its resets in RFC 3339 (to the second), a
		// token quota's as when the bucket is full again, and rounds
		// token figures left to the nearest thousand.
		h.Set("anthropic-ratelimit-requests-limit", strconv.Itoa(f.limit))
		h.Set("anthropic-ratelimit-requests-remaining", strconv.Itoa(remaining))
		h.Set("anthropic-ratelimit-requests-reset", rfc3339Up(reset))
		set := func(name string, q quotaState) {
			h.Set("anthropic-ratelimit-"+name+"-limit", strconv.Itoa(q.limit))
			h.Set("anthropic-ratelimit-"+name+"-remaining", strconv.Itoa((q.remaining+500)/1000*1000))
			h.Set("anthropic-ratelimit-"+name+"-reset", rfc3339Up(now.Add(q.toFull)))
		}
		if f.tokenLimit > 0 {
			set("input-tokens", tok)
		}
		if f.outputLimit > 0 {
			set("output-tokens", out)
		}
		// The tokens quota is the most restrictive of the two in effect:
		// the one with the least left of its limit.
		switch {
		case f.tokenLimit > 0 && f.outputLimit > 0:
			if float64(out.remaining)/float64(out.limit) <= float64(tok.remaining)/float64(tok.limit) {
				tok = out
			}
			set("tokens", tok)
		case f.tokenLimit > 0:
			set("tokens", tok)
		case f.outputLimit > 0:
			set("tokens", out)
		}
	}
}

// openAIDuration is d as OpenAI states a reset: a Go duration, rounded up
// to the millisecond.
func openAIDuration(d time.Duration) string {
	return max(0, (d + time.Millisecond - 1).Truncate(time.Millisecond)).String()
}

// rfc3339Up is t as Anthropic states a reset: RFC 3339 in UTC, rounded up
// to the second so a client never resumes early.
func rfc3339Up(t time.Time) string {
	if t.Truncate(time.Second).Before(t) {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}

// throttle writes the provider's throttled response.
// refusedBy names the quota that refused the request ("requests", "tokens",
// "input tokens", "output tokens"); tokCost is what it would have cost the
// tokens quota, tok that quota's figures.
func (f *fake) throttle(w http.ResponseWriter, retryAfter int, refusedBy string, tokCost int, tok quotaState) {
	switch f.provider {
	case gitHub:
		// GitHub answers an exhausted primary quota with 403 (sometimes 429)
		// and this body; go-github turns it into *github.RateLimitError.
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
	case openAI:
		w.WriteHeader(http.StatusTooManyRequests)
		if refusedBy == "requests" {
			fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-fake on requests per min (RPM): Limit %d, Used %d, Requested 1. Please try again in %ds.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
				f.limit, f.limit, retryAfter)
		} else {
			fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-fake on tokens per min (TPM): Limit %d, Used %d, Requested %d. Please try again in %ds.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
				tok.limit, tok.limit-tok.remaining, tokCost, retryAfter)
		}
	case anthropicAPI:
		w.Header().Set("retry-after", strconv.Itoa(retryAfter))
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of %s per minute."}}`, refusedBy)
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
