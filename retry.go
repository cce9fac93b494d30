package pacer

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxDrain bounds how much of a throttled response's body is read before it
// is closed: enough for the usual JSON error so the connection can be
// reused, not so much that a large body costs more than a new connection.
const maxDrain = 4 << 10

// Backoff floor for throttled responses that say nothing about when to come
// back (no Retry-After, no exhausted quota with a reset time): the limiter has
// already slowed down (AIMD), this keeps a retry from following the 429 at
// once. It doubles per retry, with jitter so clients throttled together do not
// retry together.
const (
	minRetryBackoff = 200 * time.Millisecond
	maxRetryBackoff = 5 * time.Second
)

var _ http.RoundTripper = (*Transport)(nil)

var (
	errNilURL      = errors.New("pacer: nil Request.URL")
	errNilResponse = errors.New("pacer: base RoundTripper returned a nil *Response with a nil error")
)

// RoundTrip sends req once its endpoint's limiter admits it, and retries it
// when it is throttled and can be retried (see [WithRetries]). It implements
// [http.RoundTripper].
//
// It returns a [*RateLimitError] without sending, and without sleeping, when
// a wait would exceed the transport's MaxWait or pass req's context
// deadline; the context's error, promptly, when it is cancelled while
// waiting; and the last response when retries are exhausted or not allowed.
// The request body is always closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errNilURL
	}
	ctx := req.Context()
	cost := costFrom(ctx)
	u := partsOf(req)
	var (
		waitFrom time.Time // when the current attempt began waiting
		backoff  time.Duration
	)
	if t.observer != nil {
		waitFrom = time.Now()
	}
	for n := 0; ; n++ {
		ep := t.keyEndpoint(req, &u)
		var seen seenBinding
		lim := t.limiterBound(ep, &u, &seen)
		if t.longWait.fn != nil {
			t.longWait.report(lim, req.Method, time.Now())
		}
		permit, err := lim.lim.Acquire(ctx, cost)
		if err != nil {
			if n == 0 {
				closeBody(req)
			}
			if isRateLimitError(err) {
				lim.refused.Add(1)
				t.logRefused(ctx, lim.key, err)
			}
			t.release(ep, lim)
			t.report(Attempt{Endpoint: lim.key, Method: req.Method, Retry: n, Wait: elapsedSince(waitFrom), Err: err})
			return nil, err
		}
		r := req
		if n > 0 {
			var err error
			if r, err = replay(req); err != nil {
				permit.Abandon()
				t.release(ep, lim)
				t.report(Attempt{Endpoint: lim.key, Method: req.Method, Retry: n, Wait: elapsedSince(waitFrom), Err: err})
				return nil, err
			}
		}
		var sent time.Time
		if t.observer != nil {
			sent = time.Now()
		}
		resp, err := t.base.RoundTrip(r)
		if err == nil && resp == nil {
			err = errNilResponse
		}
		if err != nil {
			permit.Done(nil)
			lim.failures.Add(1)
			t.release(ep, lim)
			t.report(Attempt{Endpoint: lim.key, Method: req.Method, Retry: n, Wait: sent.Sub(waitFrom), Latency: elapsedSince(sent), Err: err})
			return nil, err
		}
		if resp.Body == nil {
			// As http.Client does: many RoundTrippers (mostly in tests) mean
			// an empty body by a nil one.
			resp.Body = http.NoBody
		}
		// One clock reading serves the headers, the limiter and the table.
		now := time.Now()
		ep.clock.observe(dateOf(resp.Header), now)
		info, _ := parseHeadersSkewed(resp.Header, now, t.maxDelay, ep.clock.offset(now))
		sig := bodySignal(resp)
		t.learn(ep, lim, &u, &seen, &permit, resp.StatusCode, info, sig, now)
		t.releaseAt(ep, lim, toNanos(now))
		throttled := sig == SignalBodyLimit || (sig != SignalGone && isThrottled(resp, &info))
		if t.observer != nil {
			t.report(Attempt{Endpoint: lim.key, Method: req.Method, Retry: n, Wait: sent.Sub(waitFrom),
				Latency: elapsedSince(sent), Status: resp.StatusCode, Throttled: throttled})
			waitFrom = time.Now()
		}
		if n == 0 {
			lim.retryBudget.deposit()
		}
		if !throttled || n >= t.retries || !t.mayRetry(req, resp) {
			return resp, nil
		}
		if overloaded(resp.StatusCode, &info) && !lim.retryBudget.withdraw() {
			// Shedding beyond what the budget covers: retries would only
			// add to the overload. The caller gets the response.
			return resp, nil
		}

		// Decide when the retry may go, before sleeping: if that is too
		// late, say so now.
		backoff = nextBackoff(backoff)
		now = time.Now()
		at := now.Add(info.RetryAfter)
		if info.RetryAfter == 0 {
			at = now.Add(retryJitter(backoff))
		}
		next := t.peekLimiter(req)
		key := lim.key
		if next != nil {
			key = next.key
			if na := next.lim.nextAllowed(); na.After(at) {
				at = na
			}
		}
		if rle := t.tooLate(ctx, key, at, now, info); rle != nil {
			// A RoundTripper that obtained a response returns it: the
			// retry that would come too late is not made, and the caller
			// gets the throttled response, body intact, at once. (A
			// *RateLimitError means nothing was sent.)
			lim.refused.Add(1)
			t.logRefused(ctx, key, rle)
			// The retry that will not be sent is an attempt refused, like
			// one refused before its first try: observers count it.
			t.report(Attempt{Endpoint: key, Method: req.Method, Retry: n + 1, Err: rle})
			return resp, nil
		}
		drain(resp.Body)
		lim.retries.Add(1)
		if t.logger != nil {
			t.logger.LogAttrs(ctx, slog.LevelDebug, "pacer: retrying throttled request",
				slog.String("endpoint", key), slog.Int("status", resp.StatusCode),
				slog.Int("retry", n+1), slog.Duration("wait", at.Sub(now)))
		}
		if err := retrySleep(ctx, at); err != nil {
			t.report(Attempt{Endpoint: key, Method: req.Method, Retry: n + 1, Wait: elapsedSince(waitFrom), Err: err})
			return nil, err
		}
	}
}

// tooLate returns the error for a retry that may not start before at, if
// that is beyond MaxWait or the context's deadline.
func (t *Transport) tooLate(ctx context.Context, key string, at, now time.Time, info Info) *RateLimitError {
	if t.maxWait > 0 && at.Sub(now) > t.maxWait {
		return &RateLimitError{Endpoint: key, RetryAt: at, Info: info}
	}
	if maxDelay := cmp.Or(t.maxDelay, DefaultMaxDelay); at.Sub(now) > maxDelay {
		// No wait is longer than MaxDelay: a retry behind a daily quota's
		// reset is refused with it, not slept on for hours.
		return &RateLimitError{Endpoint: key, RetryAt: at, Info: info}
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(at) {
		return &RateLimitError{Endpoint: key, RetryAt: at, Info: info, Err: context.DeadlineExceeded}
	}
	return nil
}

func (t *Transport) logRefused(ctx context.Context, key string, err error) {
	if t.logger != nil {
		t.logger.LogAttrs(ctx, slog.LevelDebug, "pacer: request refused",
			slog.String("endpoint", key), slog.String("error", err.Error()))
	}
}

// statusOverloaded is Anthropic's 529 overloaded_error: load shedding, retried
// like a 503 (see overloaded).
const statusOverloaded = 529

// overloaded reports whether a throttled response is the server shedding
// load rather than a rate limit: a 5xx with no Retry-After and no quota
// stated as spent.
func overloaded(status int, info *Info) bool {
	if status < 500 || info.RetryAfter > 0 {
		return false
	}
	for _, q := range info.Quotas {
		if q.spent() {
			return false
		}
	}
	return true
}

// spent reports whether q says nothing is left until a stated reset: less
// than one unit remaining. The limiter (an exhausted quota explains a
// throttle) and the retry decision (a 5xx is overload unless one is spent)
// read it the same way.
func (q Quota) spent() bool { return q.Remaining < 1 && !q.Reset.IsZero() }

// retryBudget bounds the retries of shed requests (overloaded) to a share
// of an endpoint's traffic, as gRPC's retry throttling and Finagle's retry
// budgets do: every request deposits retryBudgetRatio of a retry, every
// overload retry withdraws one, and the balance, full at first, holds at
// most retryBudgetMax. Under light shedding every shed request is retried; when
// the server sheds more than a tenth, retries stop adding to its load.
type retryBudget struct {
	spent atomic.Int64 // retryBudgetMax less the balance, in thousandths of a retry: zero is a full budget
}

const (
	// retryBudgetRatio is the share of requests that may be retried after
	// a shed: a tenth, gRPC's default token_ratio (0.1).
	retryBudgetRatio = 0.1
	// retryBudgetMax is the balance's cap, in retries: 10, gRPC's
	// max_tokens default, which lets a burst of shed requests be retried.
	retryBudgetMax = 10
)

func (b *retryBudget) deposit() {
	for {
		v := b.spent.Load()
		n := max(v-int64(retryBudgetRatio*1000), 0)
		if n == v || b.spent.CompareAndSwap(v, n) {
			return
		}
	}
}

func (b *retryBudget) withdraw() bool {
	for {
		v := b.spent.Load()
		if v+1000 > retryBudgetMax*1000 {
			return false
		}
		if b.spent.CompareAndSwap(v, v+1000) {
			return true
		}
	}
}

// isThrottled reports whether resp says the rate limit was hit: 429, 503,
// or GitHub's 403 with an exhausted quota (X-RateLimit-Remaining: 0) or a
// Retry-After (its secondary limits).
func isThrottled(resp *http.Response, info *Info) bool {
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, statusOverloaded:
		return true
	case http.StatusForbidden:
		return info.RetryAfter > 0 || spent(resp.Header.Get("X-Ratelimit-Remaining"))
	}
	return false
}

// spent reports whether a Remaining header value says nothing is left: a
// number in [0, 1), however written ("0", " 0", "0.0"). Garbage, or a
// negative number (some servers' "unknown"), is not.
func spent(remaining string) bool {
	v, err := strconv.ParseFloat(strings.TrimSpace(remaining), 64)
	return err == nil && v >= 0 && v < 1
}

// mayRetry reports whether req may be sent again after the throttled resp.
func (t *Transport) mayRetry(req *http.Request, resp *http.Response) bool {
	if !replayable(req) {
		return false
	}
	// The server's word wins: OpenAI's and Anthropic's x-should-retry,
	// Stripe's Stripe-Should-Retry.
	for _, h := range [...]string{"X-Should-Retry", "Stripe-Should-Retry"} {
		switch v := strings.TrimSpace(resp.Header.Get(h)); {
		case strings.EqualFold(v, "false"):
			return false
		case strings.EqualFold(v, "true"):
			return true
		}
	}
	return t.retryAll || idempotent(req)
}

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// idempotent reports whether sending req twice has the effect of sending it
// once (RFC 9110 section 9.2.2), by method or by an idempotency key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

// replay returns a copy of req to send again, with a fresh body: the
// caller's request is never modified.
func replay(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// drain reads what is left of a body, up to maxDrain bytes, and closes it.
func drain(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, maxDrain)
	body.Close()
}

func nextBackoff(prev time.Duration) time.Duration {
	if prev == 0 {
		return minRetryBackoff
	}
	return min(2*prev, maxRetryBackoff)
}

// retryJitter returns a duration in [d/2, d).
func retryJitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2)
}

func retrySleep(ctx context.Context, at time.Time) error {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// elapsedSince is time.Since for a start time that may be unset (observer off).
func elapsedSince(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Since(t)
}
