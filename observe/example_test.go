package observe_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/observe"
)

// An observer sees every attempt of every request: here a 429 and the
// retry that follows it. A metrics system counts them by endpoint, status
// and class (the otel module does).
func ExampleAttempt() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()

	tr := pacer.NewTransport(nil, pacer.WithObserver(func(a observe.Attempt) {
		fmt.Printf("%s retry=%d status=%d throttled=%v class=%v\n", a.Method, a.Retry, a.Status, a.Throttled, a.Class)
	}))
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(tr.Stats()[0].Mode)
	// Output:
	// GET retry=0 status=429 throttled=true class=interactive
	// GET retry=1 status=200 throttled=false class=interactive
	// probing
}
