package awsadaptive

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// The SDK's standard retryer defaults, which adaptive mode wraps.
const (
	DefaultMaxAttempts = 3
	DefaultMaxBackoff  = 20 * time.Second
	retryQuotaSize     = 500 // retry token bucket
	retryCost          = 5   // tokens a retry takes; refunded if it succeeds
	noRetryIncrement   = 1   // tokens a first-attempt success adds back
)

// Transport (made by NewTransport) is an http.RoundTripper with the SDK's adaptive retry mode: every
// attempt first takes a token from the adaptive RateLimit (sleeping until it
// can), reports whether it was throttled (a 429: the SDK knows throttles by
// error code, never by headers), and a throttled or 5xx attempt is retried up
// to MaxAttempts in all, after an exponential backoff with full jitter
// (rand·2^attempt seconds, at most MaxBackoff), while the retry quota lasts.
// Retry-After is ignored, as the SDK ignores it.
//
// Only requests without a body are retried (the benchmark sends GETs).
type Transport struct {
	Base        http.RoundTripper
	MaxAttempts int           // 0: DefaultMaxAttempts
	MaxBackoff  time.Duration // 0: DefaultMaxBackoff

	Limit *RateLimit

	mu    sync.Mutex
	quota int // retry quota left
}

// NewTransport returns the adaptive-mode transport over base (nil:
// http.DefaultTransport).
func NewTransport(base http.RoundTripper) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{Base: base, Limit: NewRateLimit(nil), quota: retryQuotaSize}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	maxAttempts, maxBackoff := t.MaxAttempts, t.MaxBackoff
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	ctx := req.Context()
	retried := false
	for attempt := 1; ; attempt++ {
		if err := t.acquire(ctx); err != nil {
			return nil, err
		}
		r := req
		if attempt > 1 {
			r = req.Clone(ctx)
		}
		resp, err := t.Base.RoundTrip(r)
		throttled := err == nil && resp.StatusCode == http.StatusTooManyRequests
		t.Limit.Update(throttled)
		retryable := throttled || (err == nil && resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented)
		if err == nil && !retryable {
			t.settle(retried)
		}
		if !retryable || attempt >= maxAttempts || req.Body != nil || !t.takeRetryToken() {
			return resp, err
		}
		retried = true
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		backoff := time.Duration(rand.Float64() * float64(time.Second) * float64(int64(1)<<min(attempt, 30)))
		if err := sleep(ctx, min(backoff, maxBackoff)); err != nil {
			return nil, err
		}
	}
}

// acquire sleeps until the rate limiter grants an attempt token.
func (t *Transport) acquire(ctx context.Context) error {
	for {
		ok, wait := t.Limit.AcquireToken(1)
		if ok {
			return nil
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

func (t *Transport) takeRetryToken() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.quota < retryCost {
		return false
	}
	t.quota -= retryCost
	return true
}

// settle returns quota on success: the retry's cost if the request needed
// retries, the no-retry increment otherwise.
func (t *Transport) settle(retried bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := noRetryIncrement
	if retried {
		n = retryCost
	}
	t.quota = min(retryQuotaSize, t.quota+n)
}

// CloseIdleConnections forwards to the base transport.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
