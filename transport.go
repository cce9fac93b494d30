package pacer

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/internal/header"
	"github.com/pacer-go/pacer/internal/mark"
	"github.com/pacer-go/pacer/internal/response"
	"github.com/pacer-go/pacer/internal/retryrule"
	"github.com/pacer-go/pacer/observe"
	"github.com/pacer-go/pacer/work"
)

// Transport is an [http.RoundTripper] that keeps every request inside the
// rate limits of the endpoint it goes to.
//
// Each request is mapped to an endpoint key: the [WithEndpoint] pattern it
// matches, else the [WithKeyFunc] result, else its scheme://host. Each key
// gets an [Adaptive] limiter on first use, which learns the server's quota
// from response headers and spends it evenly (scaled by the safety factor),
// honours Retry-After, and probes (CUBIC) when the server only answers 429.
//
// When responses name a server-side bucket (X-RateLimit-Bucket,
// X-RateLimit-Resource), the routes the server puts in one bucket share one
// limiter, keyed "scope#bucket" (scope: the key, or scheme://host for a
// pattern). A route is an endpoint key plus the request path's first segment,
// which is where GitHub splits its resources (/search, /graphql, the rest
// "core"); its first request waits on the key's own limiter and reveals the
// bucket, later ones wait on the bucket's. For finer splits give the routes
// their own keys with [WithEndpoint] patterns.
//
// A request waits for its limiter before it is sent, fails at once with a
// [*RateLimitError] when that wait would pass its context's deadline or the
// transport's MaxWait, and is retried (after a fresh wait) when the response
// is a 429, a 503 or GitHub's 403 with an exhausted quota (or as the
// [WithRetry] policy decides), if it can be replayed safely (see package
// retry).
//
// A Transport is safe for concurrent use. It never modifies a request, always
// closes the request body, and leaves the response body to the caller, byte
// for byte as the server sent it: it reads at most 4 KiB of a 403's or
// 429's (and puts them back), and a 2xx text/event-stream's first event as
// the caller reads it, for a refusal sent inside the stream (Vertex AI's
// in-stream 429), which the endpoint's limiter learns then. Its
// memory is bounded: idle endpoints are evicted (after ten minutes,
// or as long as their quota's window when it is longer; see also
// [WithMaxEndpoints]) lazily, without a background goroutine, so a Transport
// needs no Close.
//
// The zero Transport is ready to use, as the zero [http.Client] is: it
// behaves as NewTransport(nil) does, sending through [http.DefaultTransport]
// with every default. It must not be copied after first use.
type Transport struct {
	once         sync.Once // runs setup: in NewTransport, or on a zero Transport's first use
	base         http.RoundTripper
	eps          *endpoints
	mux          *http.ServeMux // nil without WithEndpoint
	keyFunc      func(*http.Request) string
	retries      int
	retryPolicy  func(context.Context, *http.Response, error) (bool, error) // nil: retry.DefaultCheck, without the context it needs
	prepareRetry func(*http.Request) error
	maxWait      time.Duration
	maxDelay     time.Duration // the cap on a server's pauses: the longer of maxWait and DefaultMaxDelay
	caps         header.Caps   // what a response's reading believes: waits up to maxDelay
	logger       *slog.Logger
	observer     func(observe.Attempt)
	longWait     longWaitHook
	views        sync.Pool // *http.Request views for pattern matching
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that sends requests through base once
// their endpoint's limiter admits them. A nil base means
// [http.DefaultTransport]. base is wrapped, never modified.
//
// It panics if an Option is nil, or if two [WithEndpoint] patterns conflict
// or one is invalid, with a message naming the pattern, as
// [http.ServeMux.Handle] does.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	c := defaultConfig()
	for _, o := range opts {
		if o == nil {
			panic("pacer: NewTransport: nil Option")
		}
		o(&c)
	}
	t := new(Transport)
	t.once.Do(func() { t.setup(base, &c) })
	return t
}

// init sets a zero Transport up on its first use, as NewTransport(nil)
// would; for any other Transport it costs one atomic load.
func (t *Transport) init() {
	t.once.Do(func() {
		c := defaultConfig()
		t.setup(nil, &c)
	})
}

func (t *Transport) setup(base http.RoundTripper, c *config) {
	if base == nil {
		base = http.DefaultTransport
	}
	t.base = base
	t.keyFunc = c.keyFunc
	t.retries = c.retries
	t.retryPolicy, t.prepareRetry = c.retryPolicy, c.prepareRetry
	t.maxWait, t.maxDelay = c.maxWait, max(c.maxWait, DefaultMaxDelay)
	t.caps = capsOf(t.maxDelay)
	t.logger, t.observer, t.longWait = c.logger, c.observer, c.longWait
	t.views.New = func() any { return new(http.Request) }
	if len(c.rules) > 0 {
		t.mux = http.NewServeMux()
		for _, r := range mergeRules(c.rules) {
			register(t.mux, r)
		}
	}
	t.eps = newEndpoints(c.maxEndpoints, func(key string, ceiling Limit, burst int, stated []Quota, routed bool) *Adaptive {
		return NewAdaptive(AdaptiveConfig{
			Key:          key,
			SafetyFactor: c.safety,
			Ceiling:      ceiling,
			CeilingBurst: burst,
			MaxWait:      c.maxWait,
			MaxDelay:     t.maxDelay,
			Logger:       c.logger,
			Store:        c.store,
			BatchReserve: c.batchReserve,
			Quotas:       stated,
			routed:       routed,
		})
	})
}

var (
	errNilURL      = errors.New("pacer: nil Request.URL")
	errNilResponse = errors.New("pacer: base RoundTripper returned a nil *Response with a nil error")
)

// RoundTrip sends req once its endpoint's limiter admits it, and retries it
// when the retry policy asks for it and the request can be retried (see
// [WithRetry]). It implements [http.RoundTripper].
//
// It returns a [*RateLimitError] without sending, and without sleeping, when
// a wait would exceed the transport's MaxWait or pass req's context
// deadline; the context's error, promptly, when it is cancelled while
// waiting; and the last response when retries are exhausted, not allowed,
// or would come too late. The request body is always closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	if req.URL == nil {
		closeRequestBody(req)
		return nil, errNilURL
	}
	// Field by field (see response.Read for why not whole values).
	var rt roundTrip
	rt.t, rt.req, rt.ctx = t, req, req.Context()
	m := mark.Of(rt.ctx)
	rt.cost, rt.class = m.Cost, work.Class(m.Class)
	rt.probe, _ = m.Probe.(*sendProbe)
	rt.u.method, rt.u.scheme, rt.u.host, rt.u.path = req.Method, req.URL.Scheme, req.URL.Host, req.URL.Path // partsOf, in place
	if t.observer != nil {
		rt.waitFrom = time.Now()
	}
	// The outcome is filled in place, not returned: 128 bytes copied
	// twice per attempt were 4% of a plain request's instructions.
	var o attemptOutcome
	rt.attempt(nil, &o)
	for o.retry() {
		rt.n++
		prev := o
		rt.attempt(&prev, &o)
	}
	return o.result()
}

// One request's path, top to bottom: RoundTrip runs attempts until one ends
// without a retry. An attempt (run) waits out the retry the previous one
// asked for, picks its endpoint and limiter (endpoint.go), waits for the
// limiter (limiter.go: admission), sends through the base transport and
// reads what the response means (response.Read); settle then squares it in
// one place (the limiter learns the response, as Permit.Done does: limiter.go's
// settle; the endpoints are released, Stats counts, the observer sees the
// attempt), and decide (below) asks the retry policy whether and when to go
// again.

// roundTrip is one call of RoundTrip, across its attempts.
type roundTrip struct {
	t        *Transport
	req      *http.Request // the caller's: sent by the first attempt, cloned by retries, never modified
	ctx      context.Context
	cost     float64
	class    work.Class
	probe    *sendProbe // an adaptive Executor's call, told when each attempt goes; nil if none
	u        urlParts
	n        int           // the attempt: 0 for the first, n for the n-th retry
	waitFrom time.Time     // when the attempt began to wait; set only for an observer
	backoff  time.Duration // the last retry's backoff floor (see nextBackoff)
}

// attemptOutcome is how an attempt ended: with what RoundTrip returns, or with a
// retry to make. The response of an attempt that asks for a retry stays
// open until the retry goes (then it is drained) or is refused as too late
// (then it is returned).
type attemptOutcome struct {
	resp *http.Response
	err  error // a transport error, or the retry policy's
	// retryAt is when the retry may start; zero when there is none.
	retryAt time.Time
	key     string    // the endpoint the retry expects to wait on
	lim     *endpoint // the endpoint the attempt waited on, which counts the retry
	info    Info      // what the response said, for a *RateLimitError
}

func (o *attemptOutcome) retry() bool { return !o.retryAt.IsZero() }

// result is what RoundTrip returns for o: never a response together with an
// error. A response the retry policy turned into an error is drained and
// closed, as go-retryablehttp does.
func (o *attemptOutcome) result() (*http.Response, error) {
	if o.err != nil && o.resp != nil {
		drain(o.resp.Body)
		return nil, o.err
	}
	return o.resp, o.err
}

// attemptState is one attempt as it went: what it took, sent and got. run
// fills it and may stop at any step; settle then squares it, whichever step
// it stopped at.
type attemptState struct {
	key       string    // the endpoint the attempt waited on (or would have), for the observer
	ep, lim   *endpoint // the request's endpoint and the one whose limiter it waits on; nil until acquired
	seen      seenBinding
	permit    Permit
	out       *http.Request // what the attempt sends: req, or a replay of it; nil before the replay is made
	sent      bool          // out was handed to the base transport, which closes its body
	sentAt    time.Time     // set only for an observer or an Executor's probe
	resp      *http.Response
	now       time.Time        // when resp arrived
	read      response.Meaning // what resp means
	err       error            // why the attempt got no response
	refusedBy *endpoint        // the endpoint whose Refused counts err, a *RateLimitError
	tooLate   bool             // the previous attempt's retry was refused before it waited
	look      bool             // the request is its host's look at a route (awaitRoute)
}

// attempt makes attempt rt.n and sets o to how it ended. prev is the
// previous attempt's outcome, which asked for this retry; nil for the
// first.
//
// run takes the steps (wait for the retry, for the limiter, send, read the
// response) and stops at the first that fails; settle is the one place that
// settles the permit, releases the endpoints, counts, reports and closes a
// body that was not sent, whatever the step; decide asks the retry policy.
func (rt *roundTrip) attempt(prev, o *attemptOutcome) {
	var a attemptState
	rt.run(prev, &a)
	rt.settle(&a)
	rt.decide(prev, &a, o)
}

func (rt *roundTrip) run(prev *attemptOutcome, a *attemptState) {
	t, req := rt.t, rt.req
	if prev == nil {
		a.out = req // closed by settle unless the base transport gets it
	} else {
		a.key = prev.key
		if !rt.awaitRetry(prev, a) {
			return
		}
	}
	a.ep = t.keyEndpoint(req, &rt.u)
	if a.look, a.err = t.awaitRoute(rt.ctx, a.ep, &rt.u); a.err != nil {
		a.lim, a.key = a.ep, a.ep.key // waited on no other
		return
	}
	a.lim = t.limiterBound(a.ep, &rt.u, &a.seen)
	a.key = a.lim.key
	if t.longWait.fn != nil {
		t.longWait.report(a.lim, req.Method, time.Now())
	}
	if !rt.admit(a) {
		return
	}
	var err error
	if prev != nil {
		if a.out, err = replay(req); err == nil && t.prepareRetry != nil {
			err = t.prepareRetry(a.out)
		}
		if err != nil {
			a.err = err
			return
		}
	}
	if t.observer != nil || rt.probe != nil {
		a.sentAt = time.Now()
		rt.probe.sent(a.sentAt)
	}
	a.sent = true
	resp, err := t.base.RoundTrip(a.out)
	if err == nil && resp == nil {
		err = errNilResponse
	}
	if err != nil {
		a.err = err
		return
	}
	if resp.Body == nil {
		// As http.Client does: many RoundTrippers (mostly in tests) mean
		// an empty body by a nil one.
		resp.Body = http.NoBody
	}
	a.resp = resp
	// One clock reading serves the headers, the limiter and the table.
	a.now = time.Now()
	response.Read(&a.read, resp, a.now, t.caps, &a.ep.clock)
	if response.Stream(resp) {
		// A refusal a stream's first event states, as the caller reads
		// it, teaches the limiter that admitted the request then
		// (response.Watch says why it is not read now).
		response.Watch(resp, t.caps, &a.ep.clock, nil, a.lim.lim.learnLate)
	}
}

// admit waits for a's limiter to admit the request. It reports false, with
// a.err set, when it does not. A request that waited while a response
// bound its route to a server-named bucket (the first look's answer named
// it) goes on to wait on that bucket's limiter instead: admitted by the
// one it started on, it would spend that one's budget beside the
// bucket's, one server bucket spent by two limiters.
func (rt *roundTrip) admit(a *attemptState) bool {
	for n := 0; ; n++ {
		err := a.lim.lim.acquire(rt.ctx, &a.permit, rt.cost, rt.class)
		if err != nil {
			a.err = err
			if isRateLimitError(err) {
				a.refusedBy = a.lim
			}
			return false
		}
		if a.ep.routes.Load() == a.seen.routes || n == maxRebinds {
			return true // the common case: no binding changed meanwhile
		}
		lim := rt.t.limiterBound(a.ep, &rt.u, &a.seen)
		if lim == a.lim {
			if lim != a.ep {
				rt.t.eps.release(lim) // limiterBound's reference: a holds one
			}
			return true
		}
		a.permit.Abandon()
		if a.lim != a.ep {
			rt.t.eps.release(a.lim)
		}
		a.lim, a.key = lim, lim.key
	}
}

// maxRebinds bounds how often one attempt moves to another limiter after a
// wait: a route is rebound when its server names another bucket, which a
// server does not do from one answer to the next.
const maxRebinds = 2

// awaitRetry waits until the retry prev asked for may start. It reports
// false, with a.err set, when the retry is refused (it would start past
// MaxWait, MaxDelay or the context's deadline: a *RateLimitError, and
// prev's response is kept for the caller) or the context ends while it
// waits.
func (rt *roundTrip) awaitRetry(prev *attemptOutcome, a *attemptState) bool {
	t := rt.t
	now := time.Now()
	if rle := t.tooLate(rt.ctx, prev.key, prev.retryAt, now, prev.info); rle != nil {
		a.err, a.refusedBy, a.tooLate = rle, prev.lim, true
		return false
	}
	status := 0
	if prev.resp != nil {
		status = prev.resp.StatusCode
		drain(prev.resp.Body)
	}
	prev.lim.retries.Add(1)
	if t.logger != nil {
		t.logger.LogAttrs(rt.ctx, slog.LevelDebug, "pacer: retrying throttled request",
			slog.String("endpoint", prev.key), slog.Int("status", status),
			slog.Int("retry", rt.n), slog.Duration("wait", prev.retryAt.Sub(now)))
	}
	if err := sleepUntil(rt.ctx, prev.retryAt); err != nil {
		a.err = err
		return false
	}
	return true
}

// settle squares an attempt, whichever step it stopped at: the permit is
// settled (Done once sent, learning the response if there is one; Abandon
// if admitted but not sent), a request body not handed to the base
// transport is closed, the endpoints are released, and the attempt is
// counted and reported.
func (rt *roundTrip) settle(a *attemptState) {
	t := rt.t
	if a.look && a.resp == nil {
		t.endLook(a.ep) // the look went without an answer: another may look
	}
	switch {
	case a.resp != nil:
		t.learn(a.ep, a.lim, &rt.u, &a.seen, &a.permit, &a.read, a.now, a.look)
	case a.sent:
		a.permit.Done(nil)
		a.lim.failures.Add(1)
	default:
		a.permit.Abandon() // nothing to do if nothing was admitted
		if a.out != nil {
			closeRequestBody(a.out)
		}
	}
	if a.ep != nil {
		// The response's clock reading if there is one: a clock read
		// costs as much as the rest of the release.
		var at int64
		if a.now.IsZero() {
			at = clockNow()
		} else {
			at = clockOf(a.now)
		}
		t.releaseAt(a.ep, a.lim, at)
	}
	if a.refusedBy != nil {
		a.refusedBy.refused.Add(1)
		t.logRefused(rt.ctx, a.key, a.err)
	}
	if t.observer == nil {
		return
	}
	at := observe.Attempt{Endpoint: a.key, Method: rt.req.Method, Class: rt.class, Retry: rt.n, Err: a.err, Wait: elapsedSince(rt.waitFrom)}
	if a.sent && !a.sentAt.IsZero() {
		at.Wait = a.sentAt.Sub(rt.waitFrom)
		at.Latency = time.Since(a.sentAt)
		if a.resp != nil {
			at.Latency = a.now.Sub(a.sentAt)
			at.Status, at.Throttled = a.resp.StatusCode, a.read.Throttled
		}
	}
	t.observer(at)
	rt.waitFrom = time.Now()
}

// CloseIdleConnections closes the idle connections of the base transport, if
// it has a CloseIdleConnections method (http.Client.CloseIdleConnections
// calls this).
func (t *Transport) CloseIdleConnections() {
	t.init()
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *Transport) logRefused(ctx context.Context, key string, err error) {
	if t.logger != nil {
		t.logger.LogAttrs(ctx, slog.LevelDebug, "pacer: request refused",
			slog.String("endpoint", key), slog.String("error", err.Error()))
	}
}

// isRateLimitError reports whether err is a *RateLimitError.
func isRateLimitError(err error) bool {
	var rle *RateLimitError
	return errors.As(err, &rle)
}

// elapsedSince is time.Since for a start time that may be unset (observer off).
func elapsedSince(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return time.Since(t)
}

// closeRequestBody keeps http.Client.Do's (and RoundTripper's) promise that the request body is
// closed even when the request is never sent.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// The decide step: whether a settled attempt is retried, and when. It is
// the Transport's own loop (the policy it asks, and what it may replay, are
// in retry.go), so a request's path ends in the file it began in.

// checkRetry asks the retry policy about a sent attempt.
func (rt *roundTrip) checkRetry(a *attemptState) (bool, error) {
	if rt.t.retryPolicy == nil {
		// retry.DefaultCheck, without a context to carry the verdict.
		return a.resp != nil && retryrule.Retry(rt.req, a.resp, a.read.Throttled), nil
	}
	ctx := rt.ctx
	if a.resp != nil {
		ctx = retryrule.WithVerdict(ctx, retryrule.Verdict{Req: rt.req, Resp: a.resp, Throttled: a.read.Throttled})
	}
	return rt.t.retryPolicy(ctx, a.resp, a.err)
}

// decide turns a settled attempt into its outcome: what RoundTrip returns,
// or a retry and when it may start. A retry is made when the policy asks
// for one and the transport's bounds allow it: retries left, a request
// that may be sent again, the retry budget for shed load. The outcome goes
// to o, which the caller holds across attempts (not prev).
func (rt *roundTrip) decide(prev *attemptOutcome, a *attemptState, o *attemptOutcome) {
	if a.tooLate {
		// A RoundTripper that obtained a response returns it: the retry
		// that would come too late is not made, and the caller gets the
		// throttled response, body intact, at once. (A *RateLimitError
		// means nothing was sent.)
		*o = attemptOutcome{resp: prev.resp, err: prev.err}
		return
	}
	if !a.sent {
		*o = attemptOutcome{err: a.err}
		return
	}
	t := rt.t
	*o = attemptOutcome{resp: a.resp, err: a.err}
	if a.resp != nil && rt.n == 0 {
		a.lim.retryBudget.deposit()
	}
	retry, err := rt.checkRetry(a)
	if err != nil {
		o.err = err
	}
	if !retry || rt.n >= t.retries || !mayReplay(rt.req, a.resp) {
		return
	}
	if (a.resp == nil || a.read.Overloaded()) && !a.lim.retryBudget.withdraw() {
		// Shedding (or failing) beyond what the budget covers: retries
		// would only add to the overload. The caller gets what it got.
		return
	}
	rt.backoff = nextBackoff(rt.backoff)
	now := time.Now()
	at := now.Add(a.read.Info.RetryAfter)
	if a.read.Info.RetryAfter == 0 {
		at = now.Add(retryJitter(rt.backoff))
	}
	key := a.lim.key
	if next := t.peekLimiter(rt.req); next != nil {
		key = next.key
		if na := next.lim.nextAllowed(); na.After(at) {
			at = na
		}
	}
	// The Info, quotas and all, outlives the attempt: a *RateLimitError
	// reports it if the retry comes too late.
	o.retryAt, o.key, o.lim, o.info = at, key, a.lim, infoOf(a.read.Info, &a.read.Quotas)
}

// tooLate returns the error for a retry that may not start before at, if
// that is beyond MaxWait, MaxDelay or the context's deadline.
func (t *Transport) tooLate(ctx context.Context, key string, at, now time.Time, info Info) *RateLimitError {
	if t.maxWait > 0 && at.Sub(now) > t.maxWait {
		return &RateLimitError{Endpoint: key, RetryAt: at, Info: info}
	}
	if at.Sub(now) > t.maxDelay {
		// No wait is longer than MaxDelay: a retry behind a daily quota's
		// reset is refused with it, not slept on for hours.
		return &RateLimitError{Endpoint: key, RetryAt: at, Info: info}
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(at) {
		return &RateLimitError{Endpoint: key, RetryAt: at, Info: info, Err: context.DeadlineExceeded}
	}
	return nil
}

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
