package pacerotel_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/pacer-go/pacer"
	pacerotel "github.com/pacer-go/pacer/otel"
)

// Pacer's metrics on a Prometheus /metrics page, through OpenTelemetry's
// Prometheus exporter. The API here throttles the first request (429,
// Retry-After: 1) and then states its quota in IETF RateLimit headers; pacer
// retries, and the page shows the three requests, the throttled one, the
// retry and the quota left.
func Example_prometheus() {
	// The exporter is a metric reader: collection happens at each scrape.
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry),
		otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())

	obs, err := pacerotel.NewObserver(provider.Meter(pacerotel.ScopeName))
	if err != nil {
		log.Fatal(err)
	}
	tr := pacer.NewTransport(nil,
		pacer.WithObserver(obs.Record),
		// One endpoint named after the API: the pacer.endpoint label is then
		// "inventory" instead of the test server's address.
		pacer.WithKeyFunc(func(*http.Request) string { return "inventory" }))
	reg, err := obs.Watch(tr)
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Unregister()

	api := httptest.NewServer(throttleFirst())
	defer api.Close()
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	for range 2 {
		resp, err := client.Get(api.URL + "/items")
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	// What Prometheus would scrape (serve the handler as /metrics), less the
	// lines whose values depend on timing: the wait histogram's buckets and
	// sum, and the learnt rate.
	page := httptest.NewRecorder()
	promhttp.HandlerFor(registry, promhttp.HandlerOpts{}).ServeHTTP(page, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(page.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "pacer_") && !strings.Contains(line, "_bucket") &&
			!strings.Contains(line, "_sum") && !strings.HasPrefix(line, "pacer_client_rate_limit") {
			fmt.Println(line)
		}
	}
	// Output:
	// pacer_client_active_requests{pacer_endpoint="inventory"} 0
	// pacer_client_queued_requests{pacer_endpoint="inventory"} 0
	// pacer_client_quota_limit{pacer_endpoint="inventory",pacer_quota_name="default"} 100
	// pacer_client_quota_remaining{pacer_endpoint="inventory",pacer_quota_name="default"} 98
	// pacer_client_requests_total{http_request_method="GET",http_response_status_code="200",pacer_class="interactive",pacer_endpoint="inventory"} 2
	// pacer_client_requests_total{http_request_method="GET",http_response_status_code="429",pacer_class="interactive",pacer_endpoint="inventory"} 1
	// pacer_client_retries_total{http_request_method="GET",pacer_class="interactive",pacer_endpoint="inventory"} 1
	// pacer_client_throttled_responses_total{http_request_method="GET",http_response_status_code="429",pacer_class="interactive",pacer_endpoint="inventory"} 1
	// pacer_client_wait_duration_seconds_count{pacer_class="interactive",pacer_endpoint="inventory",pacer_wait_result="admitted"} 3
}

// throttleFirst answers 429 with Retry-After: 1 to the first request and
// 200 with the IETF headers of a 100-per-minute quota after it.
func throttleFirst() http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("RateLimit-Policy", `"default";q=100;w=60`)
		w.Header().Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=60`, 101-n.Load()))
		fmt.Fprintln(w, `{"items":[]}`)
	})
}
