package pacer

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/response"
)

// The tests of the limiter drive it as the Transport does: Acquire, then
// Permit.Done with the response a server sent, read by the production path
// (body, Date, headers). These build those responses from the header fields
// the providers document.

// reply is a response with the given status and header fields, each of
// fields a list of name, value pairs.
func reply(status int, fields ...[]string) *http.Response {
	h := http.Header{}
	for _, f := range fields {
		for i := 0; i+1 < len(f); i += 2 {
			h.Add(f[i], f[i+1])
		}
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody}
}

// requestsLeft is OpenAI's fields for a quota of limit requests with
// remaining left, resetting in resetIn (a Go duration from now, as OpenAI
// states it: exact, with no clock to correct). They read as the Quota
// named "requests".
func requestsLeft(limit, remaining float64, resetIn time.Duration) []string {
	return []string{
		"X-Ratelimit-Limit-Requests", num(limit),
		"X-Ratelimit-Remaining-Requests", num(remaining),
		"X-Ratelimit-Reset-Requests", resetIn.String(),
	}
}

// tokensLeft is requestsLeft for OpenAI's token quota, the Quota named
// "tokens", counted in tokens.
func tokensLeft(limit, remaining float64, resetIn time.Duration) []string {
	return []string{
		"X-Ratelimit-Limit-Tokens", num(limit),
		"X-Ratelimit-Remaining-Tokens", num(remaining),
		"X-Ratelimit-Reset-Tokens", resetIn.String(),
	}
}

// policyLeft is the IETF fields for the named policy of limit requests per
// window (0: none stated), with remaining left and more available in
// resetIn (draft-08 and later: RateLimit-Policy and RateLimit; seconds
// with up to three decimals, so resetIn is exact to the millisecond).
func policyLeft(name string, limit float64, window time.Duration, remaining float64, resetIn time.Duration) []string {
	pol := strconv.Quote(name) + ";q=" + num(limit)
	if window > 0 {
		pol += ";w=" + num(window.Seconds())
	}
	return []string{
		"RateLimit-Policy", pol,
		"RateLimit", strconv.Quote(name) + ";r=" + num(remaining) + ";t=" + strconv.FormatFloat(resetIn.Seconds(), 'f', 3, 64),
	}
}

// retryAfter is a Retry-After of d, in seconds.
func retryAfter(d time.Duration) []string {
	return []string{"Retry-After", num(d.Seconds())}
}

// meaningOf is what resp, arriving at now, means, read as the Transport
// and Permit.Done read it (with the default wait cap, no clock to correct).
func meaningOf(resp *http.Response, now time.Time) *response.Meaning {
	m := new(response.Meaning)
	response.Read(m, resp, now, capsOf(DefaultMaxDelay), nil)
	return m
}

// num is a figure as servers write it: a plain decimal.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// admit acquires a permit for a request of the given cost and fails the
// test on an error.
func admit(t testing.TB, a *Adaptive, cost float64) *Permit {
	t.Helper()
	p, err := a.Acquire(context.Background(), cost)
	require.NoError(t, err)
	return &p
}

// waitTook acquires a permit for a request of no cost and returns how
// long Acquire blocked (virtual time).
func waitTook(t testing.TB, a *Adaptive) time.Duration {
	t.Helper()
	start := time.Now()
	admit(t, a, 0)
	return time.Since(start)
}
