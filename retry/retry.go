// Package retry says how a pacer Transport retries a request: how many
// times ([Policy.Max]), which attempts are worth it ([Policy.Check], by
// default [DefaultCheck]) and how a retry's request is made ready
// ([Policy.Prepare]). pacer.WithRetry gives a Transport its Policy; without
// it, a Transport retries as the zero Policy says.
//
// A request is retried only when its body can be replayed (no body, or
// Request.GetBody set, as http.NewRequest does for in-memory bodies). Which
// methods are safe to send again is the Check's judgement, made on the
// response: DefaultCheck retries a non-idempotent request (POST, PATCH
// without an idempotency key) only when the response says the server
// refused it without acting on it. After a transport error, when the
// request may have been acted on and no response says otherwise, only an
// idempotent request is sent again (GET, HEAD, OPTIONS, TRACE, PUT, DELETE,
// or any method with an Idempotency-Key or X-Idempotency-Key header),
// whatever the Check says.
//
// Every retry waits for the endpoint's limiter again, at least as long as
// the response's Retry-After. A retry that could not start before the
// Transport's MaxWait or the context's deadline is not made: the response
// is returned at once, body intact. Retries of load shed by the server (a
// 5xx without a Retry-After or a spent quota, or a gateway's relay of its
// upstream's refusal: OpenRouter's "Provider returned error") and of
// transport errors draw on a retry budget, a tenth of the endpoint's
// traffic, so they never multiply an overloaded server's load.
package retry

import (
	"context"
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/header"
	"github.com/pacer-go/pacer/internal/response"
	"github.com/pacer-go/pacer/internal/retryrule"
)

// Policy is how a Transport retries. The zero value is the default:
// [DefaultMax] retries of what [DefaultCheck] asks to retry, each an exact
// copy of the request.
type Policy struct {
	// Max is how many times a request is retried when Check asks for it.
	// 0 means DefaultMax; [None] (any negative Max) disables retries.
	Max int

	// Check judges whether an attempt is worth retrying; nil means
	// DefaultCheck. It has the signature of go-retryablehttp's CheckRetry,
	// and its meaning, so a check written for one works with the other: it
	// is called after every attempt that was sent, with the response (resp
	// non-nil, err nil) or the base transport's error (resp nil); ctx is
	// the request's context. It is not called for requests that were not
	// sent (the limiter refused, the context ended while waiting): there
	// is nothing to judge.
	//
	// Returning true asks for a retry, which is made within the bounds that
	// keep it safe and bounded (see the package doc: Max, a replayable
	// request, an idempotent one after a transport error, the retry
	// budget, MaxWait and the deadline); when it is not made, the caller
	// gets what the attempt obtained. For a response, Check is the judge of
	// whether the request may be sent twice: returning true retries a POST
	// (resp.Request is the request sent, when the base transport sets it,
	// as net/http's does). Returning a non-nil error ends the request with
	// that error unless a retry is made, as in go-retryablehttp: the
	// response, if any, is drained and closed, and the caller gets the
	// error alone.
	//
	// Call DefaultCheck from Check to change only some decisions (see the
	// example). Check runs on the request's goroutine; it must be safe for
	// concurrent use and must not close or consume resp.Body unless it
	// returns an error. It is a function rather than an interface, as
	// go-retryablehttp's CheckRetry is and failsafe-go's HandleIf is: the
	// decision needs nothing but the attempt's result, and a function
	// value composes by wrapping.
	Check func(ctx context.Context, resp *http.Response, err error) (bool, error)

	// Prepare, when set, is called on every retry's request before it is
	// sent, as go-retryablehttp's PrepareRetry: to sign it again (AWS
	// SigV4, HMAC schemes with a timestamp or nonce), refresh a token or
	// set a header that counts attempts. nil means none: a retry is an
	// exact copy of the request.
	//
	// r is a clone of the caller's request with a fresh body from GetBody,
	// made once the endpoint's limiter has admitted the retry, just before
	// it is sent: a signature's timestamp is as fresh as it can be. Prepare
	// may change r's headers and URL; if it replaces r.Body it closes the
	// body it replaces. The caller's request is never touched. An error
	// ends the request with that error, unsent, and r's body is closed.
	Prepare func(r *http.Request) error
}

const (
	// DefaultMax is how many times a Transport retries a request when
	// Policy.Max is 0.
	DefaultMax = 3
	// None, as Policy.Max, disables retries: for a client that retries
	// on its own (go-retryablehttp, an SDK's retry loop).
	None = -1
)

// DefaultCheck is a Transport's Check unless [Policy.Check] replaces it: it
// asks for a retry of a throttled response (429, 503, Anthropic's 529, a
// 403 with an exhausted X-RateLimit-Remaining or a Retry-After, a 403 or
// 429 whose body states a secondary rate limit) unless the server says
// x-should-retry: false or Stripe-Should-Retry: false. It never retries a
// transport error (the request may have reached the server, and the
// limiter learnt nothing), a quota gone for good (OpenAI's
// insufficient_quota and billing errors), nor a request larger than the
// whole limit that refused it (an OpenAI-style message's "Requested"
// beyond its "Limit", as Groq sends it): waiting cannot help either. It
// never returns an error.
//
// A request that is not idempotent (a POST, a PATCH without an idempotency
// key) is retried only when the response says the server did not act on
// it: a rate-limit refusal (429, 529 or a rate-limited 403: a limiter
// answers before the request's work starts, which is why OpenAI's,
// Anthropic's and GitHub's clients retry them), or x-should-retry: true. A
// 503 may come from a proxy after the work began, so a POST that meets one
// is returned, not sent again.
//
// Within a Transport's Check, it reuses the Transport's reading of the
// response; called elsewhere, it reads the headers and, for a 403 or 429,
// up to 4 KiB of the body, which it puts back byte for byte.
func DefaultCheck(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if err != nil || resp == nil {
		return false, nil
	}
	v, ok := retryrule.VerdictOf(ctx, resp)
	if !ok {
		var m response.Meaning
		// Whether a response is throttled does not depend on the caps: a wait
		// clamped is still a wait.
		response.Read(&m, resp, time.Now(), header.Caps{Wait: header.DefaultWait, Reset: header.ResetHorizon}, nil)
		v = retryrule.Verdict{Req: resp.Request, Resp: resp, Throttled: m.Throttled}
	}
	return retryrule.Retry(v.Req, resp, v.Throttled), nil
}
