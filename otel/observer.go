package pacerotel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/observe"
)

// ScopeName is the instrumentation scope to name the Meter after:
// provider.Meter(pacerotel.ScopeName).
const ScopeName = "github.com/pacer-go/pacer/otel"

// Metric names; see the package documentation for units and attributes.
const (
	MetricWaitDuration       = "pacer.client.wait.duration"
	MetricRequests           = "pacer.client.requests"
	MetricThrottledResponses = "pacer.client.throttled_responses"
	MetricRetries            = "pacer.client.retries"
	MetricRefusals           = "pacer.client.refusals"
	MetricRateLimit          = "pacer.client.rate_limit"
	MetricQuotaRemaining     = "pacer.client.quota.remaining"
	MetricQuotaLimit         = "pacer.client.quota.limit"
	MetricQueuedRequests     = "pacer.client.queued_requests"
	MetricActiveRequests     = "pacer.client.active_requests"
)

// Attribute keys; see the package documentation for their values.
const (
	AttrEndpoint   = attribute.Key("pacer.endpoint")
	AttrWaitResult = attribute.Key("pacer.wait.result")
	AttrQuotaName  = attribute.Key("pacer.quota.name")
	// AttrClass is a request's class of work (work.Class: "interactive",
	// "batch"), on every per-attempt instrument.
	AttrClass = attribute.Key("pacer.class")
	// The HTTP semantic conventions' keys, spelt here so that this module
	// needs no semconv package version.
	AttrMethod    = attribute.Key("http.request.method")
	AttrStatus    = attribute.Key("http.response.status_code")
	AttrErrorType = attribute.Key("error.type")
)

// Values of [AttrWaitResult].
const (
	WaitAdmitted = "admitted"
	WaitRefused  = "refused"
	WaitCanceled = "canceled"
)

// WaitBuckets are the explicit bucket boundaries, in seconds, that the wait
// histogram advises: the semantic conventions' advice for HTTP client
// durations (http.client.request.duration), extended by 30, 60 and 300 s
// since a wait for a quota's reset commonly spans a minute-long window and
// GitHub asks for at least 60 s after a secondary limit.
var WaitBuckets = []float64{0, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300}

// maxCachedSets bounds the attribute sets Record keeps precomputed (each
// new one copies the cache, so the bound also caps that cost). Real traffic
// has a few sets per endpoint (methods × statuses); past the bound a set is
// built per call, which costs allocations, never correctness.
const maxCachedSets = 4096

// Observer turns a [pacer.Transport]'s attempts and statistics into
// OpenTelemetry metrics. Pass its Record method to [pacer.WithObserver] for
// the counters and the wait histogram, and the Transport to Watch for the
// gauges. An Observer is safe for concurrent use and may serve several
// Transports whose endpoint keys differ; Transports that share keys need one
// Observer each, told apart by [WithAttributes].
type Observer struct {
	meter  metric.Meter
	static []attribute.KeyValue

	wait      metric.Float64Histogram
	requests  metric.Int64Counter
	throttled metric.Int64Counter
	retries   metric.Int64Counter
	refusals  metric.Int64Counter

	rateLimit      metric.Float64ObservableGauge
	quotaRemaining metric.Float64ObservableGauge
	quotaLimit     metric.Float64ObservableGauge
	queued         metric.Int64ObservableUpDownCounter
	active         metric.Int64ObservableUpDownCounter

	// sets caches measurement options per attribute combination. Record
	// reads it without a lock or an allocation; a new combination (a new
	// endpoint, method or status: rare) copies the map under setsMu.
	sets   atomic.Pointer[map[setKey]*attrOpts]
	setsMu sync.Mutex
}

// attrOpts are one attribute set as the options each kind of call takes,
// built once so that a measurement allocates neither the option nor its
// variadic slice.
type attrOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

// Option configures an [Observer].
type Option func(*config)

type config struct {
	static []attribute.KeyValue
}

// WithAttributes adds attrs to every measurement the Observer makes, to tell
// Transports apart (for example attribute.String("pacer.client.name",
// "github")). It panics if a key is one the Observer sets itself.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	for _, kv := range attrs {
		switch kv.Key {
		case AttrEndpoint, AttrWaitResult, AttrQuotaName, AttrClass, AttrMethod, AttrStatus, AttrErrorType:
			panic(fmt.Sprintf("pacerotel: WithAttributes(%q): the Observer sets this key itself", kv.Key))
		}
		if !kv.Valid() {
			panic(fmt.Sprintf("pacerotel: WithAttributes(%q): invalid attribute", kv.Key))
		}
	}
	attrs = append([]attribute.KeyValue(nil), attrs...)
	return func(c *config) { c.static = append(c.static, attrs...) }
}

// NewObserver creates the instruments of the package documentation on meter
// (name it [ScopeName]). It returns the meter's error if one cannot be
// created, and panics if meter is nil.
func NewObserver(meter metric.Meter, opts ...Option) (*Observer, error) {
	if meter == nil {
		panic("pacerotel: NewObserver(nil meter)")
	}
	var c config
	for _, o := range opts {
		if o == nil {
			panic("pacerotel: NewObserver: nil Option")
		}
		o(&c)
	}
	o := &Observer{meter: meter, static: c.static}
	var errs []error
	collect := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	o.wait, err = meter.Float64Histogram(MetricWaitDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a request attempt waited for its endpoint's rate limiter (and, for a retry, its backoff) before it was sent or given up."),
		metric.WithExplicitBucketBoundaries(WaitBuckets...))
	collect(err)
	o.requests, err = meter.Int64Counter(MetricRequests, metric.WithUnit("{request}"),
		metric.WithDescription("HTTP requests the rate-limited transport sent to the server, retries included."))
	collect(err)
	o.throttled, err = meter.Int64Counter(MetricThrottledResponses, metric.WithUnit("{response}"),
		metric.WithDescription("Responses saying the rate limit was hit: 429, 503, or 403 with an exhausted quota or a Retry-After."))
	collect(err)
	o.retries, err = meter.Int64Counter(MetricRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Retries of throttled requests."))
	collect(err)
	o.refusals, err = meter.Int64Counter(MetricRefusals, metric.WithUnit("{request}"),
		metric.WithDescription("Requests refused without being sent because their wait would pass MaxWait or the context's deadline."))
	collect(err)
	o.rateLimit, err = meter.Float64ObservableGauge(MetricRateLimit, metric.WithUnit("{request}/s"),
		metric.WithDescription("Request rate the endpoint's limiter currently allows; absent while unlimited."))
	collect(err)
	o.quotaRemaining, err = meter.Float64ObservableGauge(MetricQuotaRemaining, metric.WithUnit("{unit}"),
		metric.WithDescription("What the server last said is left of the quota, in the quota's unit."))
	collect(err)
	o.quotaLimit, err = meter.Float64ObservableGauge(MetricQuotaLimit, metric.WithUnit("{unit}"),
		metric.WithDescription("The quota per window the server last stated, in the quota's unit."))
	collect(err)
	o.queued, err = meter.Int64ObservableUpDownCounter(MetricQueuedRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting for the endpoint's rate limiter."))
	collect(err)
	o.active, err = meter.Int64ObservableUpDownCounter(MetricActiveRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests the endpoint's limiter admitted whose response has not arrived."))
	collect(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("pacerotel: NewObserver: %w", err)
	}
	return o, nil
}

// Record records one attempt; pass it to [pacer.WithObserver]. It runs on
// the request's goroutine and only adds to instruments, without allocating:
// an attribute combination is built once, under a short lock, the first
// time it is seen, and read lock-free after that.
func (o *Observer) Record(a observe.Attempt) {
	ctx := context.Background()
	method := normalizeMethod(a.Method)
	class := a.Class.String()
	refused := a.Err != nil && isRefusal(a.Err)
	canceled := !refused && a.Status == 0 && a.Latency == 0 && isContextError(a.Err)

	result := WaitAdmitted
	switch {
	case refused:
		result = WaitRefused
	case canceled:
		result = WaitCanceled
	}
	o.wait.Record(ctx, a.Wait.Seconds(), o.opts(setKey{endpoint: a.Endpoint, class: class, result: result}).rec...)

	if a.Retry > 0 && !refused { // a retry refused before its wait was never sent
		o.retries.Add(ctx, 1, o.opts(setKey{endpoint: a.Endpoint, class: class, method: method}).add...)
	}
	switch {
	case refused:
		o.refusals.Add(ctx, 1, o.opts(setKey{endpoint: a.Endpoint, class: class, method: method}).add...)
	case a.Status != 0:
		attrs := o.opts(setKey{endpoint: a.Endpoint, class: class, method: method, status: a.Status}).add
		o.requests.Add(ctx, 1, attrs...)
		if a.Throttled {
			o.throttled.Add(ctx, 1, attrs...)
		}
	case a.Err != nil && !canceled:
		// The base transport failed. observe.Attempt does not say whether an
		// error came from the base transport or from before sending: a context
		// error with no time spent sending is taken for a canceled wait, and
		// a replayed body's GetBody failing (rare) counts as sent.
		o.requests.Add(ctx, 1, o.opts(setKey{endpoint: a.Endpoint, class: class, method: method, errType: errorType(a.Err)}).add...)
	}
}

// setKey identifies an attribute set; zero fields are absent attributes.
type setKey struct {
	endpoint, class, method, result, errType, quota string
	status                                          int
}

// opts returns the options of k's attribute set (plus the static
// attributes), from the cache when it is there.
func (o *Observer) opts(k setKey) *attrOpts {
	if m := o.sets.Load(); m != nil {
		if a, ok := (*m)[k]; ok {
			return a
		}
	}
	kvs := make([]attribute.KeyValue, 0, len(o.static)+5)
	kvs = append(kvs, o.static...)
	kvs = append(kvs, AttrEndpoint.String(k.endpoint))
	if k.class != "" {
		kvs = append(kvs, AttrClass.String(k.class))
	}
	if k.method != "" {
		kvs = append(kvs, AttrMethod.String(k.method))
	}
	if k.status != 0 {
		kvs = append(kvs, AttrStatus.Int(k.status))
	}
	if k.result != "" {
		kvs = append(kvs, AttrWaitResult.String(k.result))
	}
	if k.errType != "" {
		kvs = append(kvs, AttrErrorType.String(k.errType))
	}
	if k.quota != "" {
		kvs = append(kvs, AttrQuotaName.String(k.quota))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	a := &attrOpts{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}, obs: []metric.ObserveOption{opt}}

	o.setsMu.Lock()
	defer o.setsMu.Unlock()
	old := o.sets.Load()
	if old != nil {
		if cached, ok := (*old)[k]; ok {
			return cached // built meanwhile by another goroutine
		}
		if len(*old) >= maxCachedSets {
			return a
		}
	}
	m := make(map[setKey]*attrOpts, 1+lenOf(old))
	if old != nil {
		maps.Copy(m, *old)
	}
	m[k] = a
	o.sets.Store(&m)
	return a
}

func lenOf(m *map[setKey]*attrOpts) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// Watch registers a callback that observes the gauges of the package
// documentation from t.Stats() at every collection, until the returned
// registration's Unregister. The callback holds t's locks only as long as
// Stats does (each endpoint's briefly, one after another) and never blocks
// on a limiter or the network.
func (o *Observer) Watch(t *pacer.Transport) (metric.Registration, error) {
	if t == nil {
		panic("pacerotel: Watch(nil Transport)")
	}
	reg, err := o.meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		o.observe(obs, t.Stats())
		return nil
	}, o.rateLimit, o.quotaRemaining, o.quotaLimit, o.queued, o.active)
	if err != nil {
		return nil, fmt.Errorf("pacerotel: Watch: %w", err)
	}
	return reg, nil
}

func (o *Observer) observe(obs metric.Observer, stats []pacer.Stats) {
	for _, s := range stats {
		ep := o.opts(setKey{endpoint: s.Key}).obs
		if s.Limit != pacer.Inf {
			obs.ObserveFloat64(o.rateLimit, float64(s.Limit), ep...)
		}
		obs.ObserveInt64(o.queued, int64(s.Waiting), ep...)
		obs.ObserveInt64(o.active, int64(s.InFlight), ep...)
		for _, q := range s.LastInfo.Quotas {
			name := q.Name
			if name == "" {
				name = "default"
			}
			qa := o.opts(setKey{endpoint: s.Key, quota: name}).obs
			if q.Remaining >= 0 { // -1: the server stated the limit alone
				obs.ObserveFloat64(o.quotaRemaining, q.Remaining, qa...)
			}
			if q.Limit > 0 {
				obs.ObserveFloat64(o.quotaLimit, q.Limit, qa...)
			}
		}
	}
}

// normalizeMethod returns method as the HTTP semantic conventions record it:
// a known method as is, "" as GET (net/http's meaning), anything else
// "_OTHER" so that a caller cannot grow the attribute's cardinality.
func normalizeMethod(m string) string {
	switch m {
	case "":
		return http.MethodGet
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace, "QUERY":
		return m
	}
	return "_OTHER"
}

// isRefusal reports whether err is pacer's refusal to wait. It is not
// inlined into Record so that its errors.As target is allocated only when
// there is an error.
func isRefusal(err error) bool {
	var rle *pacer.RateLimitError
	return errors.As(err, &rle)
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// errorType returns the error.type of a failed request: "timeout" and
// "canceled" for the usual context and network causes, else the Go type.
func errorType(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return fmt.Sprintf("%T", err)
}
