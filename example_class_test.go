package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pacer-go/pacer"
)

// hourlyQuota is a fake API with GitHub's headers and a quota of limit
// requests an hour.
type hourlyQuota struct {
	mu    sync.Mutex
	limit int
	used  int
	reset time.Time
}

// spent is how many requests the quota counted.
func (q *hourlyQuota) spent() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

func (q *hourlyQuota) RoundTrip(req *http.Request) (*http.Response, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	status := http.StatusOK
	if q.used < q.limit {
		q.used++
	} else {
		status = http.StatusTooManyRequests
	}
	h := http.Header{}
	h.Set("X-RateLimit-Limit", strconv.Itoa(q.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(q.limit-q.used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(q.reset.Unix(), 10))
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
}

// A batch job and an interactive caller share one quota: the job spends
// what the quota affords at once, but leaves a tenth of it to interactive
// work, which then goes at once too.
func ExampleWithClass() {
	api := &hourlyQuota{limit: 100, reset: time.Now().Add(time.Hour)}
	// Fail fast rather than wait an hour for the next window.
	client := &http.Client{Transport: pacer.NewTransport(api, pacer.WithMaxWait(time.Second))}

	get := func(path string) int {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com"+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println("error:", err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// An unmarked request is interactive work.
	fmt.Println("interactive:", get("/me"))

	// Every request this executor sends is batch work.
	job := pacer.NewExecutor(client, pacer.WithDefaultClass(pacer.Batch), pacer.WithMaxConcurrency(1))
	defer job.Close()
	sent, refused := 0, 0
	for range 100 {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
		resp, err := job.Do(context.Background(), req)
		var rle *pacer.RateLimitError
		switch {
		case errors.As(err, &rle):
			refused++
		case err == nil:
			resp.Body.Close()
			sent++
		}
	}
	fmt.Printf("batch: %d sent, %d refused\n", sent, refused)

	// The reserve is there for interactive work.
	fmt.Println("interactive:", get("/me"))
	// Output:
	// interactive: 200
	// batch: 89 sent, 11 refused
	// interactive: 200
}
