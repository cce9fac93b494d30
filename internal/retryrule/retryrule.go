// Package retryrule is the default retry rule, which package retry's
// DefaultCheck states and a pacer Transport applies: a throttled response
// is retried unless the server says not to (OpenAI's and Anthropic's
// x-should-retry, Stripe's Stripe-Should-Retry), and a request that may
// not be sent twice only when the server refused it before acting on it
// or says to retry it.
//
// A Transport reads each response once; [WithVerdict] hands that reading
// to DefaultCheck called from within a user's policy, so that both judge
// the response alike.
package retryrule

import (
	"context"
	"net/http"
	"strings"

	"github.com/pacer-go/pacer/internal/response"
)

// Retry is the rule's decision on resp, a response to req (nil: unknown,
// judged not idempotent) that the reading found throttled or not.
func Retry(req *http.Request, resp *http.Response, throttled bool) bool {
	if !throttled {
		return false
	}
	switch serverSays(resp) {
	case serverSaysNo:
		return false
	case serverSaysYes:
		return true
	}
	return (req != nil && Idempotent(req)) || refusedUnacted(resp.StatusCode)
}

// Idempotent reports whether sending req twice has the effect of sending
// it once (RFC 9110 section 9.2.2), by method or by an idempotency key.
func Idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

// refusedUnacted reports whether a throttled response with this status says
// the server refused the request before acting on it: a rate limiter's
// answer (429, a rate-limited 403) or Anthropic's 529, which the API sends
// when it is too overloaded to start.
func refusedUnacted(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusForbidden || status == response.StatusOverloaded
}

// The server's word on a retry: OpenAI's and Anthropic's x-should-retry,
// Stripe's Stripe-Should-Retry.
const (
	serverSaysNothing = iota
	serverSaysNo
	serverSaysYes
)

// serverSays returns the server's word on retrying resp's request, if any.
func serverSays(resp *http.Response) int {
	if resp == nil {
		return serverSaysNothing
	}
	for _, h := range [...]string{"X-Should-Retry", "Stripe-Should-Retry"} {
		switch v := strings.TrimSpace(resp.Header.Get(h)); {
		case strings.EqualFold(v, "false"):
			return serverSaysNo
		case strings.EqualFold(v, "true"):
			return serverSaysYes
		}
	}
	return serverSaysNothing
}

// Verdict is a Transport's reading of a response, as the rule needs it.
type Verdict struct {
	Req       *http.Request // the caller's, whatever the base transport put in Resp.Request
	Resp      *http.Response
	Throttled bool
}

type verdictKey struct{}

// WithVerdict returns a copy of ctx that carries v to the policy it is
// passed to.
func WithVerdict(ctx context.Context, v Verdict) context.Context {
	return context.WithValue(ctx, verdictKey{}, v)
}

// VerdictOf returns the verdict ctx carries on resp, if it carries one.
func VerdictOf(ctx context.Context, resp *http.Response) (Verdict, bool) {
	v, ok := ctx.Value(verdictKey{}).(Verdict)
	return v, ok && v.Resp == resp
}
