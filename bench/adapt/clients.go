package main

import (
	"fmt"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/time/rate"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/bench/internal/awsadaptive"
)

// clientKind names a client under test, as it appears in the table and plot.
type clientKind string

// The clients, in the order of the table and the plot.
const (
	clientPacer     clientKind = "pacer"
	clientPlain     clientKind = "net/http"
	clientRetryable clientKind = "retryablehttp"
	clientXRate     clientKind = "x/time/rate"
	clientCubic     clientKind = "aws-cubic"
)

func allClients() []clientKind {
	return []clientKind{clientPacer, clientPlain, clientRetryable, clientXRate, clientCubic}
}

// clientDescriptions say what each client is, for RESULTS.md.
var clientDescriptions = map[clientKind]string{
	clientPacer:     "`pacer.NewTransport(base)`, zero configuration (safety factor 0.9, 3 retries)",
	clientPlain:     "a plain `http.Client`: no limiting, no retries; a 429 goes back to the caller",
	clientRetryable: "`retryablehttp.NewClient()` defaults (4 retries, backoff 1 s·2ⁿ up to 30 s, or Retry-After when it is whole seconds or a date), used through `StandardClient()`; logger off",
	clientXRate:     "`rate.NewLimiter(quota/window, 1)` waited on before each request: fixed at the documented quota, no retries",
	clientCubic:     "the AWS SDK for Go v2 adaptive retry mode, rewritten in `bench/internal/awsadaptive`: CUBIC token bucket switched on by the first 429, 3 attempts, jittered exponential backoff, ignores headers",
}

// newClient returns a fresh client of the given kind sending through base.
// Only the transport under each client is shared in kind (wireTap over an
// http.Transport); every policy is the library's default.
func newClient(kind clientKind, base http.RoundTripper, sc scenario) (*http.Client, error) {
	switch kind {
	case clientPacer:
		return &http.Client{Transport: pacer.NewTransport(base)}, nil
	case clientPlain:
		return &http.Client{Transport: base}, nil
	case clientRetryable:
		c := retryablehttp.NewClient()
		c.Logger = nil // it logs every attempt at DEBUG otherwise
		c.HTTPClient.Transport = base
		return c.StandardClient(), nil
	case clientXRate:
		lim := rate.NewLimiter(rate.Limit(sc.quotaRate()), 1)
		return &http.Client{Transport: &rateTransport{lim: lim, base: base}}, nil
	case clientCubic:
		return &http.Client{Transport: awsadaptive.NewTransport(base)}, nil
	}
	return nil, fmt.Errorf("unknown client %q", kind)
}

// rateTransport waits on an x/time/rate Limiter before each request, as a
// user pacing a client by hand at the documented quota would.
type rateTransport struct {
	lim  *rate.Limiter
	base http.RoundTripper
}

func (t *rateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.lim.Wait(req.Context()); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

func (t *rateTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
