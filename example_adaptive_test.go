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

	// Before any response: slow start (one request in flight).
	fmt.Println(a.Stats().Mode)

	if err := a.Wait(ctx, 0); err != nil {
		return
	}
	// ... send the request; the server answers 200 with IETF headers:
	// 599 requests left, the window resets in 60 s, 600 per 60 s.
	h := http.Header{}
	h.Set("RateLimit", `"default";r=599;t=60`)
	h.Set("RateLimit-Policy", `"default";q=600;w=60`)
	info, _ := pacer.ParseHeaders(h, time.Now())
	a.Observe(http.StatusOK, info)

	st := a.Stats()
	fmt.Println(st.Mode)
	// 0.9 × (599 - 60 held back until the quota is seen to refill) / 60 s.
	fmt.Printf("%.1f requests/s\n", float64(st.Limit))
	// Output:
	// slow-start
	// headers
	// 8.1 requests/s
}

// MaxWait turns a long wait into an immediate *RateLimitError, so the caller
// can come back later instead of holding a goroutine.
func ExampleAdaptive_maxWait() {
	a := pacer.NewAdaptive(pacer.AdaptiveConfig{Key: "api", MaxWait: 30 * time.Second})
	_ = a.Wait(context.Background(), 0)
	a.Observe(http.StatusTooManyRequests, pacer.Info{RetryAfter: 10 * time.Minute})

	err := a.Wait(context.Background(), 0)
	var rle *pacer.RateLimitError
	if errors.As(err, &rle) {
		fmt.Println(rle.Endpoint, "retry in about", time.Until(rle.RetryAt).Round(time.Minute))
	}
	// Output: api retry in about 10m0s
}
