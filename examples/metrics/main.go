// Command metrics wires pacer's observer hook and Stats to a metrics system.
//
// pacer's core has no metrics dependency: WithObserver hands you one observe.Attempt
// per request attempt, and Transport.Stats a snapshot per endpoint. This
// program publishes both with the standard library's expvar (served at
// /debug/vars by any server on http.DefaultServeMux) and prints them after
// running 80 requests against a simulated API. The comments show the same
// wiring for Prometheus and OpenTelemetry; the separate module
// github.com/pacer-go/pacer/otel (directory otel/) does the OpenTelemetry
// wiring for you, with documented metric names, and exports to Prometheus.
//
//	go run ./examples/metrics
package main

import (
	"encoding/json"
	"expvar"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/observe"
)

// Metrics, keyed by endpoint (and status). The Prometheus equivalents:
//
//	attempts = promauto.NewCounterVec(prometheus.CounterOpts{Name: "pacer_attempts_total"},
//		[]string{"endpoint", "status", "retry"})
//	waits = promauto.NewHistogramVec(prometheus.HistogramOpts{Name: "pacer_wait_seconds",
//		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"endpoint"})
//
// and with OpenTelemetry:
//
//	attempts, _ := meter.Int64Counter("pacer.attempts")
//	waits, _ := meter.Float64Histogram("pacer.wait", metric.WithUnit("s"))
var (
	attempts  = expvar.NewMap("pacer_attempts")        // "endpoint status" → count
	throttled = expvar.NewMap("pacer_throttled")       // endpoint → 429/503s seen
	refused   = expvar.NewMap("pacer_refused")         // endpoint → requests refused with *RateLimitError
	waited    = expvar.NewMap("pacer_wait_seconds")    // endpoint → total time spent waiting
	latency   = expvar.NewMap("pacer_latency_seconds") // endpoint → total time in the base transport
)

// record is the observer hook. It runs on the request's goroutine after
// every attempt, so it only updates counters. With Prometheus:
//
//	attempts.WithLabelValues(a.Endpoint, strconv.Itoa(a.Status), strconv.Itoa(a.Retry)).Inc()
//	waits.WithLabelValues(a.Endpoint).Observe(a.Wait.Seconds())
//
// With OpenTelemetry:
//
//	attempts.Add(ctx, 1, metric.WithAttributes(attribute.String("endpoint", a.Endpoint),
//		attribute.Int("http.response.status_code", a.Status)))
//	waits.Record(ctx, a.Wait.Seconds(), metric.WithAttributes(attribute.String("endpoint", a.Endpoint)))
func record(a observe.Attempt) {
	status := strconv.Itoa(a.Status)
	if a.Err != nil {
		status = "error"
	}
	attempts.Add(a.Endpoint+" "+status, 1)
	if a.Throttled {
		throttled.Add(a.Endpoint, 1)
	}
	if _, ok := a.Err.(*pacer.RateLimitError); ok {
		refused.Add(a.Endpoint, 1)
	}
	waited.AddFloat(a.Endpoint, a.Wait.Seconds())
	latency.AddFloat(a.Endpoint, a.Latency.Seconds())
}

// transport is the Transport whose endpoints pacer_endpoints shows.
var transport atomic.Pointer[pacer.Transport]

func init() {
	// Gauges read from Stats when scraped. With Prometheus, a
	// prometheus.Collector whose Collect ranges over tr.Stats() and sends
	// MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(s.Limit), s.Key);
	// with OpenTelemetry, a Float64ObservableGauge callback doing the same.
	expvar.Publish("pacer_endpoints", expvar.Func(func() any {
		out := map[string]any{}
		tr := transport.Load()
		if tr == nil {
			return out
		}
		for _, s := range tr.Stats() {
			out[s.Key] = map[string]any{
				"limit_per_second": limitValue(s.Limit),
				"burst":            s.Burst,
				"in_flight":        s.InFlight,
				"waiting":          s.Waiting,
				"mode":             s.Mode,
			}
		}
		return out
	}))
}

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run sends 80 requests and prints the metrics to w.
func run(w io.Writer) error {
	api := apisim.New(apisim.Config{Style: apisim.StyleIETF, Limit: 40, Window: time.Second})
	srv := httptest.NewServer(api)
	defer srv.Close()

	tr := pacer.NewTransport(nil, pacer.WithObserver(record))
	transport.Store(tr)

	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 4 {
		wg.Go(func() {
			for range 20 {
				resp, err := client.Get(srv.URL + "/v1/things")
				if err != nil {
					failed.Add(1)
					log.Print(err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()

	fmt.Fprintf(w, "80 requests in %v; the server answered %d of them 429\n",
		time.Since(start).Round(100*time.Millisecond), api.Stats().Throttled)
	for _, name := range []string{"pacer_attempts", "pacer_throttled", "pacer_refused", "pacer_wait_seconds", "pacer_endpoints"} {
		fmt.Fprintf(w, "%s = %s\n", name, compact(expvar.Get(name).String()))
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d of 80 requests failed", n)
	}
	return nil
}

// limitValue makes Inf representable in JSON.
func limitValue(l pacer.Limit) any {
	if l == pacer.Inf {
		return "unlimited"
	}
	return float64(l)
}

func compact(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
