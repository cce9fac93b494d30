package apisim

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Fixed is the smallest server that counts: one window of Limit requests
// ending at Reset, answered at once with GitHub's X-RateLimit-* headers and
// a 429 once spent. Unlike a Server it keeps no clock and no latency, so
// examples and tests that print or assert exact counts get the same ones on
// every run.
type Fixed struct {
	Limit int
	Reset time.Time

	mu   sync.Mutex
	used int
}

// Spent is how many requests the window counted.
func (f *Fixed) Spent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.used
}

// RoundTrip counts req against the window and answers with its figures.
func (f *Fixed) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	status := http.StatusOK
	if f.used < f.Limit {
		f.used++
	} else {
		status = http.StatusTooManyRequests
	}
	h := http.Header{}
	h.Set("X-RateLimit-Limit", strconv.Itoa(f.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(f.Limit-f.used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(f.Reset.Unix(), 10))
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
}
