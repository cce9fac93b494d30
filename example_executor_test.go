package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer"
)

// newItemServer answers /items/<id> with "item <id>".
func newItemServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "item %s", strings.TrimPrefix(r.URL.Path, "/items/"))
	}))
}

func ExampleNewExecutor() {
	srv := newItemServer()
	defer srv.Close()

	// Any *http.Client works. With a pacer Transport underneath, requests are
	// rate limited too, and a call waiting for a slot holds no rate token.
	client := &http.Client{Transport: pacer.NewTransport(srv.Client().Transport)}
	exec := pacer.NewExecutor(client, pacer.WithMaxConcurrency(8))
	defer exec.Close()

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/items/42", nil)
	if err != nil {
		panic(err)
	}
	resp, err := exec.Do(context.Background(), req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	// Closing the body (or reading it to the end) frees the slot.
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 item 42
}

func ExampleExecutor_Go() {
	exec := pacer.NewExecutor(nil, pacer.WithMaxConcurrency(4),
		pacer.WithErrorHandler(func(err error) { fmt.Println("failed:", err) }))

	// Go blocks while all 4 slots are busy, so this loop never has more than
	// 4 goroutines of work alive, however long the list.
	var total atomic.Int64
	for i := 1; i <= 100; i++ {
		err := exec.Go(context.Background(), func(ctx context.Context) error {
			if i == 13 {
				return errors.New("unlucky 13")
			}
			total.Add(int64(i))
			return nil
		})
		if err != nil {
			fmt.Println("not started:", err)
		}
	}
	// Close waits for every function started by Go.
	if err := exec.Close(); err != nil {
		fmt.Println(err)
	}
	fmt.Println("total:", total.Load(), "failed:", exec.Stats().Failed)
	// Output:
	// failed: unlucky 13
	// total: 5037 failed: 1
}

func ExampleExecutor_Shutdown() {
	arrived := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	defer slow.Close()
	exec := pacer.NewExecutor(slow.Client())

	result := make(chan error)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, slow.URL, nil)
		_, err := exec.Do(context.Background(), req)
		result <- err
	}()
	<-arrived // the request is in flight

	// Give in-flight work 50ms to finish, then cancel it.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := exec.Shutdown(ctx)
	fmt.Println(err)
	fmt.Println("deadline:", errors.Is(err, context.DeadlineExceeded), "aborted:", errors.Is(err, pacer.ErrExecutorAborted))
	fmt.Println("request aborted:", errors.Is(<-result, pacer.ErrExecutorAborted))

	req, _ := http.NewRequest(http.MethodGet, slow.URL, nil)
	_, err = exec.Do(context.Background(), req)
	fmt.Println("after shutdown:", errors.Is(err, pacer.ErrExecutorClosed))
	// Output:
	// pacer: executor shutdown cancelled 1 running and 0 waiting calls with 0 response bodies open: context deadline exceeded
	// deadline: true aborted: true
	// request aborted: true
	// after shutdown: true
}

func ExampleExecutor_DoAll() {
	srv := newItemServer()
	defer srv.Close()
	client := &http.Client{Transport: pacer.NewTransport(srv.Client().Transport)}
	exec := pacer.NewExecutor(client, pacer.WithMaxConcurrency(4))
	defer exec.Close()

	var reqs []*http.Request
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/items/"+id, nil)
		if err != nil {
			panic(err)
		}
		reqs = append(reqs, req)
	}

	// Results come in input order however the requests finish. Breaking out
	// of the loop cancels the rest and closes their bodies.
	for i, r := range exec.DoAll(context.Background(), reqs) {
		if r.Err != nil {
			fmt.Println(i, "error:", r.Err)
			continue
		}
		body, _ := io.ReadAll(r.Response.Body)
		r.Response.Body.Close()
		fmt.Println(i, string(body))
		if i == 3 {
			break
		}
	}
	// Output:
	// 0 item a
	// 1 item b
	// 2 item c
	// 3 item d
}

// ExampleExecutor_Stats shows a progress report: the caller polls Stats on
// its own ticker, so the goroutine that draws the report is the caller's.
func ExampleExecutor_Stats() {
	exec := pacer.NewExecutor(nil, pacer.WithMaxConcurrency(2))
	for range 10 {
		_ = exec.Go(context.Background(), func(context.Context) error {
			time.Sleep(10 * time.Millisecond)
			return nil
		})
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s := exec.Stats(); s.Done < s.Submitted; s = exec.Stats() {
		<-tick.C // a progress bar would redraw here, from s
	}
	_ = exec.Close()
	s := exec.Stats() // the final state, once Close returned
	fmt.Printf("done %d of %d, %d running\n", s.Done, s.Submitted, s.Running)
	// Output: done 10 of 10, 0 running
}

// ExampleWithAdaptiveConcurrency shows an adaptive bound meeting a stated
// concurrency quota: it starts at DefaultMaxConcurrency and falls to the
// quota with the first answer that states it, and never rises above it.
func ExampleWithAdaptiveConcurrency() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An IETF RateLimit-Policy stating a quota of 4 concurrent requests.
		w.Header().Set("RateLimit-Policy", `"conc";q=4;qu="concurrent-requests"`)
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	// Between 1 and 64 calls at once, steered by the server's latency, its
	// 503s and any quota it states.
	exec := pacer.NewExecutor(srv.Client(), pacer.WithAdaptiveConcurrency(1, 64))
	defer exec.Close()
	fmt.Println("bound at the start:", exec.Stats().MaxConcurrency)

	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		panic(err)
	}
	resp, err := exec.Do(context.Background(), req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	s := exec.Stats()
	fmt.Println("bound after the first answer:", s.MaxConcurrency, "moved for:", s.LastMove)
	// Output:
	// bound at the start: 16
	// bound after the first answer: 4 moved for: quota
}
