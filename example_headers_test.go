package pacer_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/pacer-go/pacer"
)

func ExampleParseHeaders() {
	// A GitHub REST response, received 33 minutes before its window resets.
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4997")
	h.Set("X-RateLimit-Reset", "1666132381") // epoch seconds
	h.Set("X-RateLimit-Used", "3")
	h.Set("X-RateLimit-Resource", "core")
	now := time.Unix(1666132381, 0).Add(-33 * time.Minute)

	info, ok := pacer.ParseHeaders(h, now)
	fmt.Println("rate-limit headers:", ok, "bucket:", info.Bucket)
	for _, q := range info.Quotas {
		fmt.Printf("%v of %v left, resets in %v\n", q.Remaining, q.Limit, q.Reset.Sub(now))
	}
	// Output:
	// rate-limit headers: true bucket: core
	// 4997 of 5000 left, resets in 33m0s
}

func ExampleParseHeaders_ietf() {
	// The IETF draft fields (draft-08 and later), as Cloudflare sends them.
	h := http.Header{}
	h.Set("RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`)
	h.Set("RateLimit", `"burst";r=50;t=30`)
	now := time.Now()

	info, _ := pacer.ParseHeaders(h, now)
	for _, q := range info.Quotas {
		if q.Remaining < 0 {
			// A policy the RateLimit field did not speak of: the server
			// said nothing of what is left.
			fmt.Printf("%s: ?/%v per %v", q.Name, q.Limit, q.Window)
		} else {
			fmt.Printf("%s: %v/%v per %v", q.Name, q.Remaining, q.Limit, q.Window)
		}
		if !q.Reset.IsZero() {
			fmt.Printf(", more in %v", q.Reset.Sub(now))
		}
		fmt.Println()
	}
	// Output:
	// burst: 50/100 per 1m0s, more in 30s
	// daily: ?/1000 per 24h0m0s
}

func ExampleParseHeaders_openAI() {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "60")
	h.Set("x-ratelimit-remaining-requests", "59")
	h.Set("x-ratelimit-reset-requests", "1s")
	h.Set("x-ratelimit-limit-tokens", "150000")
	h.Set("x-ratelimit-remaining-tokens", "149984")
	h.Set("x-ratelimit-reset-tokens", "6m0s")
	now := time.Now()

	info, _ := pacer.ParseHeaders(h, now)
	for _, q := range info.Quotas {
		fmt.Printf("%s: %v of %v left, resets in %v\n", q.Name, q.Remaining, q.Limit, q.Reset.Sub(now))
	}
	// Output:
	// requests: 59 of 60 left, resets in 1s
	// tokens: 149984 of 150000 left, resets in 6m0s
}

// ExampleParseHeaders_retryAfter reads the wait a throttled response asks
// for, in any of the forms servers send it.
func ExampleParseHeaders_retryAfter() {
	now := time.Date(2015, 10, 21, 7, 27, 0, 0, time.UTC)
	for _, kv := range [][2]string{
		{"Retry-After", "120"},                           // delta seconds
		{"Retry-After", "2.0"},                           // decimal seconds, as Shopify sends
		{"Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"}, // HTTP-date
		{"Retry-After-Ms", "1500"},                       // milliseconds, as OpenAI sends
		{"Retry-After", "86400"},                         // a day: clamped to DefaultMaxDelay
		{"Retry-After", "soon"},                          // not a Retry-After
	} {
		h := http.Header{}
		h.Set(kv[0], kv[1])
		info, ok := pacer.ParseHeaders(h, now)
		fmt.Println(info.RetryAfter, ok)
	}
	// Output:
	// 2m0s true
	// 2s true
	// 1m0s true
	// 1.5s true
	// 1h0m0s true
	// 0s false
}
