package pacerotel_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pacer-go/pacer"
	pacerotel "github.com/pacer-go/pacer/otel"
)

// intGauge returns an Int64 gauge's series.
func (c collected) intGauge(name string) map[string]int64 {
	c.t.Helper()
	out := map[string]int64{}
	m, ok := c.metric(name)
	if !ok {
		return out
	}
	g, ok := m.Data.(metricdata.Gauge[int64])
	require.Truef(c.t, ok, "%s is a %T, not an int64 gauge", name, m.Data)
	for _, dp := range g.DataPoints {
		out[enc(dp.Attributes)] = dp.Value
	}
	return out
}

func TestWatchExecutorObservesTheBoundAndItsMovesByReason(t *testing.T) {
	h := newHarness(t)
	// The server states a concurrency quota of 5: the adaptive bound,
	// which starts at 16, falls to it with reason "quota".
	base := &responder{fn: func(_ int64, req *http.Request) (*http.Response, error) {
		return reply(req, http.StatusOK, "RateLimit-Policy", `"conc";q=5;qu="concurrent-requests"`), nil
	}}
	e := pacer.NewExecutor(&http.Client{Transport: base}, pacer.WithAdaptiveConcurrency(1, 64))
	defer e.Close()
	fixed := pacer.NewExecutor(nil, pacer.WithMaxConcurrency(7))
	defer fixed.Close()
	name := attribute.Key("executor")
	reg, err := h.obs.WatchExecutor(e, name.String("adaptive"))
	require.NoError(t, err)
	defer reg.Unregister()
	reg2, err := h.obs.WatchExecutor(fixed, name.String("fixed"))
	require.NoError(t, err)
	defer reg2.Unregister()

	c := h.collect(t)
	assert.Equal(t, map[string]int64{
		series(name.String("adaptive"), pacerotel.AttrAdaptive.Bool(true)): 16,
		series(name.String("fixed"), pacerotel.AttrAdaptive.Bool(false)):   7,
	}, c.intGauge(pacerotel.MetricExecutorLimit))

	req, err := http.NewRequest(http.MethodGet, "http://api.test/", nil)
	require.NoError(t, err)
	resp, err := e.Do(context.Background(), req)
	require.NoError(t, err)
	resp.Body.Close()

	c = h.collect(t)
	assert.Equal(t, int64(5), c.intGauge(pacerotel.MetricExecutorLimit)[series(name.String("adaptive"), pacerotel.AttrAdaptive.Bool(true))])
	moves := c.ints(pacerotel.MetricExecutorMoves)
	assert.Equal(t, int64(1), moves[series(name.String("adaptive"), pacerotel.AttrBoundReason.String("quota"))])
	assert.Equal(t, int64(0), moves[series(name.String("adaptive"), pacerotel.AttrBoundReason.String("latency"))])
	assert.Len(t, moves, 6, "one series per reason, none for the fixed executor")
}
