package pacer_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/observe"
	"github.com/pacer-go/pacer/retry"
)

// throttleOnce answers the first request 429 with Retry-After: 1, then 200s.
func throttleOnce() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4998")
		io.WriteString(w, "hello")
	}))
}

// With no configuration, a pacer Transport limits each host separately,
// learns its limits from the response headers and retries the throttled
// requests it can replay, after the Retry-After the server asked for.
func ExampleNewTransport() {
	srv := throttleOnce()
	defer srv.Close()

	client := &http.Client{Transport: pacer.NewTransport(nil)}
	resp, err := client.Get(srv.URL + "/greeting")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body))
	// Output: 200 OK hello
}

// Route patterns give parts of an API their own endpoint, with a limit the
// server's headers can lower but never raise. Requests that match no pattern
// are keyed by their host.
func ExampleWithEndpoint() {
	api := apisim.New(apisim.Config{Style: apisim.StyleIETF, Limit: 100, Window: time.Minute})
	tr := pacer.NewTransport(api.Transport(),
		pacer.WithEndpoint("GET api.example.com/search/", pacer.Every(2*time.Second), 1),
		pacer.WithEndpoint("POST api.example.com/repos/{owner}/{repo}/issues", 1, 1),
	)
	client := &http.Client{Transport: tr}
	for _, url := range []string{
		"https://api.example.com/search/code?q=pacer",
		"https://api.example.com/repos/pacer-go/pacer",
	} {
		resp, err := client.Get(url)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	for _, s := range tr.Stats() {
		fmt.Println(s.Key)
	}
	// Output:
	// GET api.example.com/search/
	// https://api.example.com
}

// An API documents a quota of 100 requests an hour but sends no rate-limit
// headers. Stated with WithQuota, the quota's requests go at once; the
// ones beyond it would wait for the next hour, longer than this client's
// MaxWait, so they fail at once with a *RateLimitError and are never sent:
// the server answers no 429.
func ExampleWithQuota() {
	api := apisim.New(apisim.Config{Style: apisim.StyleBare, Limit: 100, Window: time.Hour})
	tr := pacer.NewTransport(api.Transport(),
		pacer.WithQuota("api.example.com/", 100, time.Hour),
		pacer.WithMaxWait(time.Minute),
	)
	client := &http.Client{Transport: tr}
	sent, refused := 0, 0
	start := time.Now()
	for range 120 {
		resp, err := client.Get("https://api.example.com/v1/items")
		var rle *pacer.RateLimitError
		switch {
		case errors.As(err, &rle):
			refused++
		case err != nil:
			fmt.Println(err)
			return
		default:
			sent++
			resp.Body.Close()
		}
	}
	fmt.Println("sent:", sent, "refused before sending:", refused)
	fmt.Println("429s:", api.Stats().Throttled, "waited:", time.Since(start) > time.Second)
	// Output:
	// sent: 100 refused before sending: 20
	// 429s: 0 waited: false
}

// Most APIs count quotas per credential: key the endpoints by a hash of it,
// so each token gets its own limit and the secret itself is never kept,
// shown in Stats, logged, or carried in a RateLimitError.
func ExampleWithKeyFunc() {
	byToken := func(r *http.Request) string {
		auth := r.Header.Get("Authorization")
		if auth == "" {
			return "" // fall back to scheme://host
		}
		sum := sha256.Sum256([]byte(auth))
		return r.URL.Host + " token:" + hex.EncodeToString(sum[:6])
	}
	api := apisim.New(apisim.Config{Style: apisim.StyleIETF, Limit: 100, Window: time.Minute})
	tr := pacer.NewTransport(api.Transport(), pacer.WithKeyFunc(byToken))
	for _, token := range []string{"Bearer secret-1", "Bearer secret-2", ""} {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/user", nil)
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	for _, s := range tr.Stats() {
		fmt.Println(s.Key)
	}
	// Output:
	// api.example.com token:46b7f0c723b4
	// api.example.com token:5d13bb501fdd
	// https://api.example.com
}

// WithMaxWait turns long waits into immediate errors: a caller that cannot
// wait learns when to come back instead of holding a goroutine.
func ExampleWithMaxWait() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()

	client := &http.Client{Transport: pacer.NewTransport(nil, pacer.WithMaxWait(10*time.Second))}
	for range 3 {
		resp, err := client.Get(srv.URL + "/report")
		var rle *pacer.RateLimitError
		switch {
		case errors.As(err, &rle): // refused before sending
			fmt.Printf("come back in about %v\n", time.Until(rle.RetryAt).Round(time.Hour))
		case err == nil: // the server's answer, when a retry would wait too long
			fmt.Println("server said", resp.StatusCode)
			resp.Body.Close()
		}
	}
	fmt.Println("requests sent:", calls.Load())
	// Output:
	// server said 429
	// come back in about 1h0m0s
	// come back in about 1h0m0s
	// requests sent: 1
}

// go-retryablehttp can own the retries while pacer paces every attempt:
// put a pacer Transport under its client, and use the Transport's Backoff,
// which waits until the endpoint's limiter will admit the retry, and never
// longer than RetryWaitMax, whatever the server's Retry-After says.
func ExampleTransport_Backoff() {
	srv := throttleOnce()
	defer srv.Close()

	pt := pacer.NewTransport(nil, pacer.WithRetry(retry.Policy{Max: retry.None})) // one layer retries
	client := retryablehttp.NewClient()
	client.Logger = nil
	client.HTTPClient.Transport = pt
	client.Backoff = pt.Backoff
	client.RetryWaitMax = 5 * time.Second

	resp, err := client.Get(srv.URL + "/greeting")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// Stats shows what each endpoint's limiter has learnt and done.
func ExampleTransport_Stats() {
	srv := throttleOnce()
	defer srv.Close()

	tr := pacer.NewTransport(nil)
	client := &http.Client{Transport: tr}
	for range 3 {
		resp, err := client.Get(srv.URL + "/greeting")
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	for _, s := range tr.Stats() {
		fmt.Printf("requests=%d throttled=%d retries=%d\n", s.Requests, s.Throttled, s.Retries)
	}
	// Output: requests=4 throttled=1 retries=1
}

// An observer sees every attempt: wire it to your metrics system (see
// examples/metrics for expvar, Prometheus and OpenTelemetry).
func ExampleWithObserver() {
	srv := throttleOnce()
	defer srv.Close()

	var attempts, throttled atomic.Int64
	tr := pacer.NewTransport(nil, pacer.WithObserver(func(a observe.Attempt) {
		attempts.Add(1)
		if a.Throttled {
			throttled.Add(1)
		}
	}))
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/greeting")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Printf("attempts=%d throttled=%d\n", attempts.Load(), throttled.Load())
	// Output: attempts=2 throttled=1
}

// WithLongWaits tells the application when a request will wait long for a
// quota, before it waits: here an hourly quota the server says is spent.
func ExampleWithLongWaits() {
	reset := time.Now().Add(40 * time.Minute).Unix()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", fmt.Sprint(reset))
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	tr := pacer.NewTransport(nil,
		pacer.WithMaxWait(time.Second), // and give up at once, for the example
		pacer.WithLongWaits(10*time.Second, func(w pacer.LongWait) {
			fmt.Printf("waiting about %v for the quota's reset\n", time.Until(w.Until).Round(10*time.Minute))
		}))
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
	}
	// Output: waiting about 40m0s for the quota's reset
}
