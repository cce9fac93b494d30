package apisim_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

// A fixed clock keeps the example's output deterministic; tests use
// testing/synctest instead and leave Config.Now nil.
func fixedClock() time.Time { return time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC) }

func ExampleNew() {
	s := apisim.New(apisim.Config{
		Style:  apisim.StyleIETF,
		Limit:  2,
		Window: time.Minute,
		Now:    fixedClock,
	})
	client := &http.Client{Transport: s.Transport()}
	for range 3 {
		resp, err := client.Get("http://api.example/items")
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%d %s retry-after=%q\n", resp.StatusCode, resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"))
	}
	st := s.Stats()
	fmt.Printf("requests=%d ok=%d throttled=%d\n", st.Requests, st.OK, st.Throttled)
	// Output:
	// 200 "default";r=1;t=60 retry-after=""
	// 200 "default";r=0;t=60 retry-after=""
	// 429 "default";r=0;t=60 retry-after="60"
	// requests=3 ok=2 throttled=1
}

// Over loopback the Server is an ordinary http.Handler; token usage travels in
// the X-Apisim-Tokens request header.
func ExampleServer_ServeHTTP() {
	s := apisim.New(apisim.Config{
		Style:      apisim.StyleOpenAI,
		Limit:      60,
		Window:     time.Minute,
		TokenLimit: 10000,
		Now:        fixedClock,
	})
	srv := httptest.NewServer(s)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", nil)
	req.Header.Set(apisim.TokensHeader, "1200")
	resp, err := srv.Client().Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Header.Get("X-Ratelimit-Remaining-Requests"), resp.Header.Get("X-Ratelimit-Reset-Requests"))
	fmt.Println(resp.Header.Get("X-Ratelimit-Remaining-Tokens"), resp.Header.Get("X-Ratelimit-Reset-Tokens"))
	// Output:
	// 59 1m0s
	// 8800 1m0s
}

// Capacity is the denominator of goodput: what the visible client could have
// had, given the unseen client's share and mid-run quota changes.
func ExampleServer_Capacity() {
	now := fixedClock()
	s := apisim.New(apisim.Config{
		Style:       apisim.StyleGitHub,
		Limit:       100,
		Window:      time.Minute,
		UnseenShare: 0.3,
		Now:         func() time.Time { return now },
	})
	start := now
	resp, _ := s.Transport().RoundTrip(mustRequest("http://api.example/repos"))
	resp.Body.Close()
	s.SetLimit(50) // the quota halves from the next window
	fmt.Printf("%.0f requests in two minutes\n", s.Capacity(start, start.Add(2*time.Minute)))
	// Output:
	// 105 requests in two minutes
}

func mustRequest(url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	return req
}
