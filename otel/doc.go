// Package pacerotel records what a [pacer.Transport] does as OpenTelemetry
// metrics: how long requests wait for their endpoint's limiter, how many are
// sent, throttled, retried and refused, and what each endpoint's limiter has
// learnt (its rate, the quota the server says is left).
//
// It lives in its own module so that OpenTelemetry never enters the go.mod of
// pacer itself. Wire it in three lines:
//
//	obs, err := pacerotel.NewObserver(provider.Meter(pacerotel.ScopeName))
//	tr := pacer.NewTransport(nil, pacer.WithObserver(obs.Record)) // counters, histogram
//	reg, err := obs.Watch(tr)                                     // gauges; reg.Unregister() to stop
//
// Any OpenTelemetry exporter works; with the Prometheus exporter the names
// below become pacer_client_requests_total, pacer_client_wait_duration_seconds
// and so on (see the example).
//
// # Metrics
//
// Names and attributes follow the OpenTelemetry semantic conventions' style
// (dotted namespaces, UCUM units, {annotations} for counted things, no
// _total suffix) and the client-side rate-limiting metrics that came before:
// gRPC's A66 client metrics and ASP.NET Core's aspnetcore.rate_limiting.*.
// No semantic convention covers client-side rate limiting yet, so every name
// is in the pacer.* namespace.
//
// Recorded by [Observer.Record], once per attempt of a request (each retry
// is a new attempt):
//
//	pacer.client.wait.duration          histogram, s
//	    Time an attempt waited before it was sent or given up: the limiter's
//	    wait plus, for a retry, its backoff.
//	    Attributes: pacer.endpoint, pacer.class, pacer.wait.result.
//	pacer.client.requests               counter, {request}
//	    HTTP requests sent to the server: each attempt that reached the base
//	    transport, retries included.
//	    Attributes: pacer.endpoint, pacer.class, http.request.method, and
//	    http.response.status_code (a response) or error.type (none).
//	pacer.client.throttled_responses    counter, {response}
//	    Responses saying the rate limit was hit: 429, 503, or a 403 with an
//	    exhausted quota or a Retry-After.
//	    Attributes: pacer.endpoint, pacer.class, http.request.method, http.response.status_code.
//	pacer.client.retries                counter, {retry}
//	    Retries of throttled requests the transport decided on (the sum of
//	    pacer.Stats.Retries).
//	    Attributes: pacer.endpoint, pacer.class, http.request.method.
//	pacer.client.refusals               counter, {request}
//	    Requests refused at once with a *pacer.RateLimitError because their
//	    wait would pass MaxWait or the context's deadline,
//	    including a retry refused before its wait began (its Retry-After
//	    already too late), which is not counted as a retry.
//	    Attributes: pacer.endpoint, pacer.class, http.request.method.
//
// Observed by the callback [Observer.Watch] registers, from
// [pacer.Transport.Stats], at every collection:
//
//	pacer.client.rate_limit             gauge, {request}/s
//	    The request rate the endpoint's limiter allows now; not observed
//	    while the endpoint is unlimited (pacer.Inf).
//	    Attributes: pacer.endpoint.
//	pacer.client.quota.remaining        gauge, {unit}
//	    What the server last said is left of a quota, in the quota's unit
//	    (requests, tokens).
//	    Attributes: pacer.endpoint, pacer.quota.name.
//	pacer.client.quota.limit            gauge, {unit}
//	    The quota per window the server last stated; not observed when it
//	    stated none.
//	    Attributes: pacer.endpoint, pacer.quota.name.
//	pacer.client.queued_requests        asynchronous updowncounter, {request}
//	    Requests waiting for the endpoint's limiter.
//	    Attributes: pacer.endpoint.
//	pacer.client.active_requests        asynchronous updowncounter, {request}
//	    Requests the endpoint's limiter admitted whose response has not arrived.
//	    Attributes: pacer.endpoint.
//
// Observed by the callback [Observer.WatchExecutor] registers, from
// [pacer.Executor.Stats], at every collection: pacer.executor.concurrency.limit
// (gauge, the Executor's bound; attribute pacer.executor.adaptive) and
// pacer.executor.concurrency.moves (asynchronous counter, the adaptive
// bound's moves; attribute pacer.bound.reason: headroom, latency, overload,
// quota, rate, probe).
//
// Attributes:
//
//   - pacer.endpoint: the endpoint key of the limiter the attempt waited on,
//     as in [pacer.Stats.Key]: a [pacer.WithEndpoint] pattern, a
//     [pacer.WithKeyFunc] key, scheme://host, or "scope#bucket" for a
//     server-named bucket. Its cardinality is bounded by
//     [pacer.WithMaxEndpoints]; a key function must not return raw
//     credentials (hash them, as its documentation says).
//   - pacer.wait.result: how the wait ended: "admitted" (the limiter let the
//     attempt go), "refused" (a *pacer.RateLimitError, at once), "canceled"
//     (the request's context ended while it waited).
//   - pacer.quota.name: the quota's name from the headers ("requests",
//     "tokens", an IETF policy name, …), the Name of a [pacer.Quota];
//     "default" when the server named none.
//   - http.request.method, http.response.status_code, error.type: as the
//     HTTP semantic conventions define them; a method other than RFC
//     9110's, PATCH and QUERY is recorded as "_OTHER"; error.type is
//     "timeout", "canceled", or the Go type of the base transport's error.
//
// The wait histogram's bucket boundaries are the semantic conventions'
// advice for HTTP durations (0.005 s … 10 s) extended to 30, 60 and 300 s,
// because quota windows, and so the waits that span them, are commonly a
// minute and GitHub asks for at least 60 s after a secondary limit. A view
// can override them.
//
// throttled_responses ÷ requests is the share of requests the server
// refused: pacer keeps it near 0 after an endpoint's first response whenever
// the server's headers describe its quota, so a rise is worth an alert.
package pacerotel
