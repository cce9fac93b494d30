package integrations_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-github/v84/github"
	"github.com/pacer-go/pacer"
)

// gitHubClient is go-github on pacer; checkOn keeps go-github's own
// pre-emptive rate-limit check (its default).
func gitHubClient(tr *pacer.Transport, checkOn bool) *github.Client {
	c := github.NewClient(&http.Client{Transport: tr}).WithAuthToken("ghp_test")
	c.BaseURL, _ = url.Parse("http://api.github.test/")
	c.DisableRateLimitCheck = !checkOn
	return c
}

func getIssue(ctx context.Context, c *github.Client, n int) error {
	_, _, err := c.Issues.Get(ctx, "pacer-go", "pacer", n+1)
	return err
}

// go-github remembers the last X-RateLimit-Remaining it saw and refuses every
// call while it is 0 and the reset is ahead, with its own *RateLimitError. A
// paced job spends the quota to exactly 0 in each window, so with the check
// on, calls started between that response and the reset fail although pacer
// would have held them until the reset. The recommended setup turns the check
// off (DisableRateLimitCheck) and lets pacer wait.
func TestGitHubFanOut(t *testing.T) {
	for _, sc := range []struct {
		name    string
		checkOn bool
	}{
		{"recommended: DisableRateLimitCheck, pacer default", false},
		{"go-github's rate-limit check on (its default)", true},
	} {
		t.Run(sc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fake{provider: gitHub, limit: limit, window: window, latency: latency}
				tr := pacer.NewTransport(inMemory{f})
				c := gitHubClient(tr, sc.checkOn)
				o := fanOut(calls, workers, func(i int) error { return getIssue(background(), c, i) })
				s := f.stats()
				min := quotaMinimum(calls, limit, window)
				record(t, row{sdk: "go-github", scenario: sc.name, calls: calls, requests: s.requests, throttled: s.throttled,
					errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest,
					ratio: float64(o.elapsed) / float64(min)})
				if !sc.checkOn {
					checkPaced(t, o, s, retries(tr), min, paceBound)
					return
				}
				var rle *github.RateLimitError
				if o.errs == 0 || !errors.As(o.firstErr, &rle) {
					t.Errorf("check on: %d errors (first %v); expected go-github's RateLimitError to surface, update the README", o.errs, o.firstErr)
				}
			})
		})
	}
}

// An exhausted quota whose reset is further than the caller's deadline: pacer
// refuses at once with *pacer.RateLimitError (wrapping DeadlineExceeded),
// which go-github passes through inside a *url.Error. Without a deadline the
// call waits for the reset (on real GitHub up to an hour): give GitHub calls
// a deadline, or WithMaxWait.
func TestGitHubDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{provider: gitHub, limit: 1, window: 10 * time.Second, latency: latency}
		tr := pacer.NewTransport(inMemory{f})
		c := gitHubClient(tr, false)
		if err := getIssue(background(), c, 0); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err := getIssue(ctx, c, 1)
		var rle *pacer.RateLimitError
		if !errors.As(err, &rle) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 0 {
			t.Errorf("got %v after %v; want an immediate *pacer.RateLimitError", err, time.Since(start))
		}
		// Without a deadline: the call waits for the reset, then succeeds.
		start = time.Now()
		if err := getIssue(background(), c, 2); err != nil {
			t.Errorf("after the reset: %v", err)
		}
		if waited := time.Since(start); waited < 9*time.Second {
			t.Errorf("waited %v; want the rest of the 10 s window", waited)
		}
	})
}

// GitHub's secondary limit: 403 with Retry-After and a body naming it, the
// primary quota untouched. pacer retries it after the Retry-After (a 403 with
// Retry-After counts as throttled), so go-github's *AbuseRateLimitError does
// not reach the callers, and no call multiplies.
func TestGitHubSecondaryLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{provider: gitHub, limit: limit, window: window, latency: latency, storm: 2 * time.Second, secondary: true}
		tr := pacer.NewTransport(inMemory{f})
		c := gitHubClient(tr, false)
		o := fanOut(calls, workers, func(i int) error { return getIssue(background(), c, i) })
		s := f.stats()
		record(t, row{sdk: "go-github", scenario: "secondary limit for the first 2 s, recommended", calls: calls, requests: s.requests,
			throttled: s.throttled, errs: o.errs, refusals: o.refusals, pacerRetries: retries(tr), elapsed: o.elapsed, slowest: o.slowest,
			ratio: float64(o.elapsed) / float64(quotaMinimum(calls, limit, window)+2*time.Second)})
		var abuse *github.AbuseRateLimitError
		if o.errs != 0 {
			t.Errorf("%d calls failed (secondary-limit error surfaced: %v); first: %v", o.errs, errors.As(o.firstErr, &abuse), o.firstErr)
		}
		if s.requests > calls+retries(tr) {
			t.Errorf("%d server requests > %d calls + %d pacer retries", s.requests, calls, retries(tr))
		}
	})
}
