package pacerotel_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	pacerotel "github.com/pacer-go/pacer/otel"
)

// harness is an Observer on a meter provider whose only reader is the SDK's
// in-memory ManualReader: every collect returns the cumulative values.
type harness struct {
	reader   *sdkmetric.ManualReader
	provider *sdkmetric.MeterProvider
	obs      *pacerotel.Observer
}

func newHarness(t testing.TB, opts ...pacerotel.Option) *harness {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	obs, err := pacerotel.NewObserver(provider.Meter(pacerotel.ScopeName), opts...)
	require.NoError(t, err)
	return &harness{reader: reader, provider: provider, obs: obs}
}

// collected is one collection, with lookups by metric name. Series are keyed
// by their attributes as attribute.Set encodes them ("k=v,k=v", sorted), so a
// test states the exact series it expects, no more, no fewer.
type collected struct {
	t  testing.TB
	rm metricdata.ResourceMetrics
}

func (h *harness) collect(t testing.TB) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	return collected{t: t, rm: rm}
}

func (c collected) metric(name string) (metricdata.Metrics, bool) {
	for _, sm := range c.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// ints returns an Int64 sum's series (counter or updowncounter); empty when
// nothing was recorded.
func (c collected) ints(name string) map[string]int64 {
	c.t.Helper()
	out := map[string]int64{}
	m, ok := c.metric(name)
	if !ok {
		return out
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.Truef(c.t, ok, "%s is a %T, not an int64 sum", name, m.Data)
	for _, dp := range sum.DataPoints {
		out[enc(dp.Attributes)] = dp.Value
	}
	return out
}

// gauge returns a Float64 gauge's series.
func (c collected) gauge(name string) map[string]float64 {
	c.t.Helper()
	out := map[string]float64{}
	m, ok := c.metric(name)
	if !ok {
		return out
	}
	g, ok := m.Data.(metricdata.Gauge[float64])
	require.Truef(c.t, ok, "%s is a %T, not a float64 gauge", name, m.Data)
	for _, dp := range g.DataPoints {
		out[enc(dp.Attributes)] = dp.Value
	}
	return out
}

// hist returns a Float64 histogram's series.
func (c collected) hist(name string) map[string]metricdata.HistogramDataPoint[float64] {
	c.t.Helper()
	out := map[string]metricdata.HistogramDataPoint[float64]{}
	m, ok := c.metric(name)
	if !ok {
		return out
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.Truef(c.t, ok, "%s is a %T, not a float64 histogram", name, m.Data)
	for _, dp := range h.DataPoints {
		out[enc(dp.Attributes)] = dp
	}
	return out
}

func enc(s attribute.Set) string { return s.Encoded(attribute.DefaultEncoder()) }

// series is the key of the series with exactly attrs.
func series(attrs ...attribute.KeyValue) string { return enc(attribute.NewSet(attrs...)) }

func total[V int64 | float64](m map[string]V) V {
	var s V
	for _, v := range m {
		s += v
	}
	return s
}

// responder is an in-memory base transport: fn answers the n-th request
// (from 1). It closes request bodies, as a RoundTripper must.
type responder struct {
	calls atomic.Int64
	fn    func(n int64, req *http.Request) (*http.Response, error)
}

func (r *responder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return r.fn(r.calls.Add(1), req)
}

// reply is a response with status and header pairs ("Name", "value", …).
func reply(req *http.Request, status int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     h,
		Body:       io.NopCloser(strings.NewReader("{}")),
		Request:    req,
	}
}
