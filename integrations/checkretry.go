package integrations

import (
	"context"
	"errors"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/pacer-go/pacer"
)

// CheckRetry returns a go-retryablehttp retry policy that does not retry a
// *pacer.RateLimitError and asks next (retryablehttp.DefaultRetryPolicy when
// nil) about everything else.
//
// Why: the refusal means pacer already knows the request cannot go before
// RateLimitError.RetryAt without passing the caller's deadline or MaxWait.
// retryablehttp's own policies take it for a connection failure and retry it
// after their backoff, which either fails again (costing the caller the
// backoff) or, under a deadline, turns the refusal into a bare
// context.DeadlineExceeded. With this policy the caller gets the
// RateLimitError at once (wrapped by retryablehttp's "giving up" error, so
// use errors.As) and decides when to come back.
func CheckRetry(next retryablehttp.CheckRetry) retryablehttp.CheckRetry {
	if next == nil {
		next = retryablehttp.DefaultRetryPolicy
	}
	return func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		var rle *pacer.RateLimitError
		if errors.As(err, &rle) {
			return false, err
		}
		return next(ctx, resp, err)
	}
}
