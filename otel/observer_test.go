package pacerotel_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/observe"
	pacerotel "github.com/pacer-go/pacer/otel"
	"github.com/pacer-go/pacer/retry"
	"github.com/pacer-go/pacer/work"
)

const endpoint = "https://api.test"

var ep = pacerotel.AttrEndpoint.String(endpoint)

// cls is the class of every attempt these tests make: unmarked work.
var cls = pacerotel.AttrClass.String("interactive")

func get(t *testing.T, c *http.Client, ctx context.Context) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/v1/things", nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// A 429 with Retry-After: 2, a 503 with Retry-After: 1, then a 200 with IETF
// quota headers: one call, three requests, two throttled responses, two
// retries that waited as long as the server saw between the requests (at
// least what it asked for), and the quota the server stated.
func TestRecordsThrottledRequestItsRetriesAndTheWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		var arrivals [3]time.Time // the server's view; latency is 0 in the bubble
		base := &responder{fn: func(n int64, req *http.Request) (*http.Response, error) {
			arrivals[min(n, 3)-1] = time.Now()
			switch n {
			case 1:
				return reply(req, http.StatusTooManyRequests, "Retry-After", "2"), nil
			case 2:
				return reply(req, http.StatusServiceUnavailable, "Retry-After", "1"), nil
			}
			return reply(req, http.StatusOK,
				"RateLimit-Policy", `"default";q=100;w=60`,
				"RateLimit", `"default";r=97;t=60`), nil
		}}
		tr := pacer.NewTransport(base, pacer.WithObserver(h.obs.Record))
		reg, err := h.obs.Watch(tr)
		require.NoError(t, err)
		defer reg.Unregister()

		resp, err := get(t, &http.Client{Transport: tr}, t.Context())
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)

		c := h.collect(t)
		get, status := pacerotel.AttrMethod.String("GET"), pacerotel.AttrStatus.Int
		assert.Equal(t, map[string]int64{
			series(ep, cls, get, status(429)): 1,
			series(ep, cls, get, status(503)): 1,
			series(ep, cls, get, status(200)): 1,
		}, c.ints(pacerotel.MetricRequests))
		assert.Equal(t, map[string]int64{
			series(ep, cls, get, status(429)): 1,
			series(ep, cls, get, status(503)): 1,
		}, c.ints(pacerotel.MetricThrottledResponses))
		assert.Equal(t, map[string]int64{series(ep, cls, get): 2}, c.ints(pacerotel.MetricRetries))
		assert.Empty(t, c.ints(pacerotel.MetricRefusals))

		waits := c.hist(pacerotel.MetricWaitDuration)
		require.Len(t, waits, 1)
		w := waits[series(ep, cls, pacerotel.AttrWaitResult.String(pacerotel.WaitAdmitted))]
		assert.Equal(t, uint64(3), w.Count)
		assert.Equal(t, pacerotel.WaitBuckets, w.Bounds)
		// The first attempt went at once (slow start admits one request),
		// each retry when its Retry-After and the limiter allowed.
		want := make([]uint64, len(pacerotel.WaitBuckets)+1)
		want[0] = 1 // ≤ 0 s
		var sum float64
		for i, asked := range []float64{2, 1} {
			wait := arrivals[i+1].Sub(arrivals[i]).Seconds()
			require.GreaterOrEqualf(t, wait, asked, "retry %d honours Retry-After: %v", i+1, asked)
			want[sort.SearchFloat64s(pacerotel.WaitBuckets, wait)]++
			sum += wait
		}
		assert.Equal(t, sum, w.Sum)
		assert.Equal(t, want, w.BucketCounts)

		st := tr.Stats()
		require.Len(t, st, 1)
		quota := series(ep, pacerotel.AttrQuotaName.String("default"))
		assert.Equal(t, map[string]float64{quota: 97}, c.gauge(pacerotel.MetricQuotaRemaining))
		assert.Equal(t, map[string]float64{quota: 100}, c.gauge(pacerotel.MetricQuotaLimit))
		// 97 of 100 left for 60 s: the budget is the gate, not a rate
		// (the 429 and 503 before the headers spoke measured no capacity,
		// so no probe's rate is left either), and an unlimited rate has no
		// gauge.
		assert.Equal(t, pacer.Inf, st[0].Limit)
		assert.Empty(t, c.gauge(pacerotel.MetricRateLimit), "no rate gauge while the rate is unlimited")
		assert.Equal(t, map[string]int64{series(ep): 0}, c.ints(pacerotel.MetricQueuedRequests))
		assert.Equal(t, map[string]int64{series(ep): 0}, c.ints(pacerotel.MetricActiveRequests))
	})
}

// A RateLimit-Policy with no RateLimit field states the quota's limit and
// nothing of what is left (pacer reports its Remaining as -1): the limit
// gauge shows the policy, the remaining gauge shows nothing rather than -1
// or a full quota.
func TestAPolicyAloneHasALimitButNoRemainingGauge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		base := &responder{fn: func(_ int64, req *http.Request) (*http.Response, error) {
			return reply(req, http.StatusOK, "RateLimit-Policy", `"daily";q=1000;w=86400`), nil
		}}
		tr := pacer.NewTransport(base, pacer.WithObserver(h.obs.Record))
		reg, err := h.obs.Watch(tr)
		require.NoError(t, err)
		defer reg.Unregister()

		_, err = get(t, &http.Client{Transport: tr}, t.Context())
		require.NoError(t, err)
		c := h.collect(t)
		quota := series(ep, pacerotel.AttrQuotaName.String("daily"))
		assert.Equal(t, map[string]float64{quota: 1000}, c.gauge(pacerotel.MetricQuotaLimit))
		assert.Empty(t, c.gauge(pacerotel.MetricQuotaRemaining))
	})
}

// After a 429 with Retry-After: 30, a request whose deadline is nearer is
// refused at once (a refusal, waiting 0 s), and one whose context is
// canceled after 5 s of waiting is a canceled wait of 5 s: neither is a
// request sent.
func TestCountsRefusalsAndCanceledWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		base := &responder{fn: func(_ int64, req *http.Request) (*http.Response, error) {
			return reply(req, http.StatusTooManyRequests, "Retry-After", "30"), nil
		}}
		tr := pacer.NewTransport(base, pacer.WithObserver(h.obs.Record), pacer.WithRetry(retry.Policy{Max: retry.None}))
		client := &http.Client{Transport: tr}

		resp, err := get(t, client, t.Context())
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err = get(t, client, ctx)
		cancel()
		var rle *pacer.RateLimitError
		require.ErrorAs(t, err, &rle)

		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(5*time.Second, cancel)
		_, err = get(t, client, ctx)
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, errors.As(err, &rle))

		c := h.collect(t)
		get := pacerotel.AttrMethod.String("GET")
		assert.Equal(t, map[string]int64{series(ep, cls, get, pacerotel.AttrStatus.Int(429)): 1}, c.ints(pacerotel.MetricRequests))
		assert.Equal(t, map[string]int64{series(ep, cls, get): 1}, c.ints(pacerotel.MetricRefusals))
		assert.Empty(t, c.ints(pacerotel.MetricRetries))

		waits := c.hist(pacerotel.MetricWaitDuration)
		result := func(r string) string { return series(ep, cls, pacerotel.AttrWaitResult.String(r)) }
		require.Len(t, waits, 3)
		for r, want := range map[string]float64{pacerotel.WaitAdmitted: 0, pacerotel.WaitRefused: 0, pacerotel.WaitCanceled: 5} {
			assert.Equal(t, uint64(1), waits[result(r)].Count, r)
			assert.Equal(t, want, waits[result(r)].Sum, r)
		}
		assert.Equal(t, int64(1), tr.Stats()[0].Refused, "the observer and Stats count the same refusal")
	})
}

type boomError struct{}

func (boomError) Error() string { return "boom" }

// A base transport's failure is a request sent without a status: its
// error.type is the error's Go type, or "timeout" when the request's
// deadline ended it while it was in flight.
func TestRecordsTransportErrorsByType(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		base := &responder{fn: func(n int64, req *http.Request) (*http.Response, error) {
			if n == 1 {
				return nil, boomError{}
			}
			<-req.Context().Done() // in flight until the deadline
			return nil, req.Context().Err()
		}}
		client := &http.Client{Transport: pacer.NewTransport(base, pacer.WithObserver(h.obs.Record))}

		_, err := get(t, client, t.Context())
		require.ErrorAs(t, err, new(boomError))
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		_, err = get(t, client, ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)

		c := h.collect(t)
		get := pacerotel.AttrMethod.String("GET")
		assert.Equal(t, map[string]int64{
			series(ep, cls, get, pacerotel.AttrErrorType.String("pacerotel_test.boomError")): 1,
			series(ep, cls, get, pacerotel.AttrErrorType.String("timeout")):                  1,
		}, c.ints(pacerotel.MetricRequests))
		assert.Empty(t, c.ints(pacerotel.MetricRefusals))
		waits := c.hist(pacerotel.MetricWaitDuration)
		assert.Equal(t, uint64(2), waits[series(ep, cls, pacerotel.AttrWaitResult.String(pacerotel.WaitAdmitted))].Count,
			"both requests were admitted, neither wait was canceled")
	})
}

// Methods outside RFC 9110 are recorded as _OTHER, so callers cannot grow
// the attribute's cardinality; static attributes go on every series.
func TestNormalizesMethodsAndAddsStaticAttributes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := attribute.String("pacer.client.name", "inventory")
		h := newHarness(t, pacerotel.WithAttributes(client))
		base := &responder{fn: func(_ int64, req *http.Request) (*http.Response, error) {
			return reply(req, http.StatusOK), nil
		}}
		hc := &http.Client{Transport: pacer.NewTransport(base, pacer.WithObserver(h.obs.Record))}
		for _, m := range []string{"PROPFIND", "PATCH", "BREW"} {
			ctx := t.Context()
			if m == "BREW" {
				ctx = work.WithClass(ctx, work.Batch) // its own series
			}
			req, err := http.NewRequestWithContext(ctx, m, endpoint+"/x", nil)
			require.NoError(t, err)
			resp, err := hc.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		status := pacerotel.AttrStatus.Int(200)
		assert.Equal(t, map[string]int64{
			series(client, ep, cls, pacerotel.AttrMethod.String("_OTHER"), status):                                 1,
			series(client, ep, pacerotel.AttrClass.String("batch"), pacerotel.AttrMethod.String("_OTHER"), status): 1,
			series(client, ep, cls, pacerotel.AttrMethod.String("PATCH"), status):                                  1,
		}, h.collect(t).ints(pacerotel.MetricRequests))
	})
}

func TestInvalidConfigurationPanicsNamingIt(t *testing.T) {
	assert.PanicsWithValue(t, "pacerotel: NewObserver(nil meter)", func() { pacerotel.NewObserver(nil) })
	assert.PanicsWithValue(t, `pacerotel: WithAttributes("pacer.endpoint"): the Observer sets this key itself`,
		func() { pacerotel.WithAttributes(attribute.String("pacer.endpoint", "x")) })
	assert.PanicsWithValue(t, `pacerotel: WithAttributes(""): invalid attribute`,
		func() { pacerotel.WithAttributes(attribute.String("", "x")) })
	h := newHarness(t)
	assert.PanicsWithValue(t, "pacerotel: Watch(nil Transport)", func() { h.obs.Watch(nil) })
}

// Record is on every request's path: with the SDK's default aggregations it
// must not allocate once an endpoint's attribute sets are built.
func TestRecordDoesNotAllocateOnceWarm(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	h := newHarness(t)
	a := observe.Attempt{Endpoint: endpoint, Method: http.MethodGet, Retry: 1, Wait: time.Second,
		Latency: time.Millisecond, Status: http.StatusTooManyRequests, Throttled: true}
	h.obs.Record(a)
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.obs.Record(a) }))
}

func BenchmarkRecord(b *testing.B) {
	h := newHarness(b)
	a := observe.Attempt{Endpoint: endpoint, Method: http.MethodGet, Wait: time.Millisecond,
		Latency: time.Millisecond, Status: http.StatusOK}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.obs.Record(a)
		}
	})
}
