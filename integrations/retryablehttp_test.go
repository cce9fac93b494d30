package integrations_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/integrations"
	"github.com/pacer-go/pacer/retry"
)

// retryableClient is go-retryablehttp on tr. recommended sets the package's
// setup: Backoff from pacer and CheckRetry that lets refusals through (tr must
// have retries off (retry.None) so only retryablehttp retries).
func retryableClient(tr *pacer.Transport, recommended bool) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.HTTPClient = &http.Client{Transport: tr}
	if recommended {
		c.Backoff = tr.Backoff
		c.CheckRetry = integrations.CheckRetry(nil)
	}
	return c
}

func getItem(ctx context.Context, c *retryablehttp.Client, n int) error {
	return getItemFrom(ctx, c, "http://api.example.test", n)
}

func getItemFrom(ctx context.Context, c *retryablehttp.Client, base string, n int) error {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/items/%d", base, n), nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("item %d: %s", n, resp.Status)
	}
	return nil
}

func TestRetryableHTTPFanOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{provider: generic, limit: limit, window: window, latency: latency}
		tr := pacer.NewTransport(inMemory{f}, pacer.WithRetry(retry.Policy{Max: retry.None}))
		c := retryableClient(tr, true)
		o := fanOut(calls, workers, func(i int) error { return getItem(background(), c, i) })
		s := f.stats()
		min := quotaMinimum(calls, limit, window)
		record(t, row{sdk: "go-retryablehttp", scenario: "recommended: pacer retry.None, Backoff, CheckRetry", calls: calls,
			requests: s.requests, throttled: s.throttled, errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr),
			elapsed: o.elapsed, slowest: o.slowest, ratio: float64(o.elapsed) / float64(min)})
		// retryablehttp's retries are not pacer's: none may happen either.
		checkPaced(t, o, s, 0, min, paceBound)
	})
}

// The case: WithMaxWait(300ms) and 20 calls per 4 s, 60 calls.
func TestRetryableHTTPRefusal(t *testing.T) {
	for _, sc := range []struct {
		name        string
		recommended bool
	}{
		{"refusal, recommended (CheckRetry)", true},
		{"refusal, retryablehttp defaults", false},
	} {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: generic, limit: 20, window: 4 * time.Second, latency: latency}
				tr := pacer.NewTransport(inMemory{f}, pacer.WithRetry(retry.Policy{Max: retry.None}), pacer.WithMaxWait(300*time.Millisecond))
				c := retryableClient(tr, sc.recommended)
				o := fanOut(60, workers, func(i int) error { return getItem(background(), c, i) })
				s := f.stats()
				record(t, row{sdk: "go-retryablehttp", scenario: sc.name, calls: 60, requests: s.requests, throttled: s.throttled,
					errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest})
				if s.throttled != 0 {
					t.Errorf("server throttled %d requests", s.throttled)
				}
				if sc.recommended && (o.errs != 40 || o.refusals != o.errs || o.slowestErr > refusalBound) {
					t.Errorf("errors %d, refusals %d, slowest refusal %v; want 40 immediate refusals; first: %v", o.errs, o.refusals, o.slowestErr, o.firstErr)
				}
			})
		})
	}
}

// A deadline the quota cannot meet: with CheckRetry the caller gets pacer's
// refusal at once; with retryablehttp's defaults it sleeps its backoff into
// the deadline.
func TestRetryableHTTPDeadline(t *testing.T) {
	for _, recommended := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			f := &fake{provider: generic, limit: 1, window: 4 * time.Second, latency: latency}
			tr := pacer.NewTransport(inMemory{f}, pacer.WithRetry(retry.Policy{Max: retry.None}))
			c := retryableClient(tr, recommended)
			if err := getItem(background(), c, 0); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(background(), time.Second)
			defer cancel()
			start := time.Now()
			err := getItem(ctx, c, 1)
			took := time.Since(start)
			t.Logf("go-retryablehttp, recommended=%v: deadline refusal after %v: %v", recommended, took, err)
			var rle *pacer.RateLimitError
			if recommended && (!errors.As(err, &rle) || took != 0) {
				t.Errorf("got %v after %v; want an immediate *pacer.RateLimitError", err, took)
			}
			if !recommended && took == 0 {
				t.Errorf("defaults: refused at once (%v); the measured behaviour changed, update the README", err)
			}
		})
	}
}

// Two retry layers under a storm: pacer's default 3 retries inside
// retryablehttp's 4 multiply; the recommended setup keeps one layer.
func TestRetryableHTTPStorm(t *testing.T) {
	for _, sc := range []struct {
		name         string
		pacerRetries int
	}{
		{"storm, recommended (pacer retry.None)", retry.None},
		{"storm, pacer default retries (3) under retryablehttp's 4", retry.DefaultMax},
	} {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: generic, limit: limit, window: window, latency: latency, storm: time.Minute}
				tr := pacer.NewTransport(inMemory{f}, pacer.WithRetry(retry.Policy{Max: sc.pacerRetries}))
				c := retryableClient(tr, true)
				const n = 4
				o := fanOut(n, n, func(i int) error { return getItem(background(), c, i) })
				s := f.stats()
				record(t, row{sdk: "go-retryablehttp", scenario: sc.name, calls: n, requests: s.requests, throttled: s.throttled,
					errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest})
				if bound := n * (1 + c.RetryMax); sc.pacerRetries == retry.None && s.requests > bound {
					t.Errorf("%d server requests for %d calls; want ≤ %d (1 + RetryMax each)", s.requests, n, bound)
				}
				if bound := n * (1 + c.RetryMax); sc.pacerRetries != retry.None && s.requests <= bound {
					t.Errorf("two layers: %d server requests, no multiplication; update the README", s.requests)
				}
			})
		})
	}
}
