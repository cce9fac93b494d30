package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/pacer-go/pacer"
)

// An Adaptive paces one endpoint by what its responses say. The Transport
// does this for every endpoint; driving one by hand looks like this.
func ExampleAdaptive() {
	a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "https://api.example.com"})
	ctx := context.Background()

	// Before any response: nothing is known about the quota yet.
	fmt.Println(a.Stats().Mode)

	p, err := a.Acquire(ctx, 0)
	if err != nil {
		return
	}
	// ... send the request; the server answers 200 with IETF headers:
	// 599 requests left, the window resets in 60 s, 600 per 60 s.
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}
	resp.Header.Set("RateLimit", `"default";r=599;t=60`)
	resp.Header.Set("RateLimit-Policy", `"default";q=600;w=60`)
	p.Done(resp)

	st := a.Stats()
	fmt.Println(st.Mode)
	// What the quota affords goes at once: no pacing while 599 are left.
	fmt.Println(st.Limit == pacer.Inf)
	// Output:
	// slow-start
	// headers
	// true
}

// MaxWait turns a long wait into an immediate *RateLimitError, so the caller
// can come back later instead of holding a goroutine.
func ExampleAdaptive_maxWait() {
	a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "api", MaxWait: 30 * time.Second})
	p, _ := a.Acquire(context.Background(), 0)
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"600"}}, Body: http.NoBody}
	p.Done(resp)

	_, err := a.Acquire(context.Background(), 0)
	var rle *pacer.RateLimitError
	if errors.As(err, &rle) {
		fmt.Println(rle.Endpoint, "retry in about", time.Until(rle.RetryAt).Round(time.Minute))
	}
	// Output: api retry in about 10m0s
}

// A quota the API documents ("3 requests a minute") can be stated before
// any response does: what it affords goes at once, with no first look, and
// the request after it waits for the next window (here refused at once, as
// the wait is longer than MaxWait).
func ExampleAdaptiveConfig_quotas() {
	a := pacer.NewAdaptive(pacer.AdaptiveConfig{
		Key:     "api",
		Quotas:  []pacer.Quota{{Limit: 3, Window: time.Minute}},
		MaxWait: time.Second,
	})
	for i := range 4 {
		p, err := a.Acquire(context.Background(), 0)
		var rle *pacer.RateLimitError
		if errors.As(err, &rle) {
			fmt.Println("request", i+1, "refused: the next window opens in about", time.Until(rle.RetryAt).Round(time.Minute))
			continue
		}
		// ... send the request; this server states nothing of its quota.
		p.Done(&http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody})
		fmt.Println("request", i+1, "sent")
	}
	// Output:
	// request 1 sent
	// request 2 sent
	// request 3 sent
	// request 4 refused: the next window opens in about 1m0s
}
