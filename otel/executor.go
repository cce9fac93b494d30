package pacerotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/observe"
)

// The Executor's metrics, observed by [Observer.WatchExecutor].
const (
	MetricExecutorLimit = "pacer.executor.concurrency.limit"
	MetricExecutorMoves = "pacer.executor.concurrency.moves"
)

// Attribute keys of the Executor's metrics.
const (
	// AttrAdaptive says whether the bound adapts (pacer.WithAdaptiveConcurrency).
	AttrAdaptive = attribute.Key("pacer.executor.adaptive")
	// AttrBoundReason is why the bound moved: "headroom" (it rose),
	// "latency", "overload", "quota" or "rate" (it fell), "probe" (a dip
	// to read the latency floor again, and the return); see observe.BoundReason.
	AttrBoundReason = attribute.Key("pacer.bound.reason")
)

// executorInstruments are created on first use: an Observer that watches
// no Executor registers none.
type executorInstruments struct {
	limit metric.Int64ObservableGauge
	moves metric.Int64ObservableCounter
}

func (o *Observer) executorInstruments() (executorInstruments, error) {
	var in executorInstruments
	var err error
	in.limit, err = o.meter.Int64ObservableGauge(MetricExecutorLimit, metric.WithUnit("{request}"),
		metric.WithDescription("How many calls the Executor runs at once: its fixed bound, or the adaptive bound's current value."))
	if err != nil {
		return in, err
	}
	in.moves, err = o.meter.Int64ObservableCounter(MetricExecutorMoves, metric.WithUnit("{move}"),
		metric.WithDescription("Moves of the Executor's adaptive bound, by reason."))
	return in, err
}

// WatchExecutor registers a callback that observes e's bound from
// e.Stats() at every collection, until the returned registration's
// Unregister:
//
//	pacer.executor.concurrency.limit    gauge, {request}
//	    The Executor's bound: fixed, or the adaptive bound's current value.
//	    Attributes: pacer.executor.adaptive.
//	pacer.executor.concurrency.moves    asynchronous counter, {move}
//	    The adaptive bound's moves (ExecutorStats.Moves), by why it moved.
//	    Attributes: pacer.bound.reason.
//
// The Observer's WithAttributes apply, and attrs are added to both: name
// the Executor when an Observer watches several.
func (o *Observer) WatchExecutor(e *pacer.Executor, attrs ...attribute.KeyValue) (metric.Registration, error) {
	if e == nil {
		panic("pacerotel: WatchExecutor(nil Executor)")
	}
	in, err := o.executorInstruments()
	if err != nil {
		return nil, fmt.Errorf("pacerotel: WatchExecutor: %w", err)
	}
	base := append(append([]attribute.KeyValue(nil), o.static...), attrs...)
	with := func(kv attribute.KeyValue) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), base...), kv)...))
	}
	adaptive, fixed := with(AttrAdaptive.Bool(true)), with(AttrAdaptive.Bool(false))
	reasons := [...]metric.ObserveOption{
		with(AttrBoundReason.String(observe.BoundHeadroom.String())),
		with(AttrBoundReason.String(observe.BoundLatency.String())),
		with(AttrBoundReason.String(observe.BoundOverload.String())),
		with(AttrBoundReason.String(observe.BoundQuota.String())),
		with(AttrBoundReason.String(observe.BoundRate.String())),
		with(AttrBoundReason.String(observe.BoundProbe.String())),
	}
	reg, err := o.meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		s := e.Stats()
		if s.Adaptive {
			obs.ObserveInt64(in.limit, int64(s.MaxConcurrency), adaptive)
		} else {
			obs.ObserveInt64(in.limit, int64(s.MaxConcurrency), fixed)
			return nil
		}
		for i, n := range [...]int64{s.Moves.Headroom, s.Moves.Latency, s.Moves.Overload, s.Moves.Quota, s.Moves.Rate, s.Moves.Probe} {
			obs.ObserveInt64(in.moves, n, reasons[i])
		}
		return nil
	}, in.limit, in.moves)
	if err != nil {
		return nil, fmt.Errorf("pacerotel: WatchExecutor: %w", err)
	}
	return reg, nil
}
