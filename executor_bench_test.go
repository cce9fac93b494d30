package pacer

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The goal is Executor.Do within 5% of client.Do on loopback: compare
// BenchmarkExecutorDo with BenchmarkClientDo (run with -count 10 and
// benchstat). The InMemory pair isolates the executor's own cost from the
// network's.

func newLoopbackServer(b *testing.B) (*httptest.Server, *http.Client) {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	b.Cleanup(srv.Close)
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	return srv, client
}

func benchRequest(b *testing.B, url string) *http.Request {
	b.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

func consume(b *testing.B, resp *http.Response, err error) {
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

func BenchmarkClientDo(b *testing.B) {
	srv, client := newLoopbackServer(b)
	req := benchRequest(b, srv.URL)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Do(req)
		consume(b, resp, err)
	}
}

func BenchmarkExecutorDo(b *testing.B) {
	srv, client := newLoopbackServer(b)
	e := NewExecutor(client)
	defer e.Close()
	req := benchRequest(b, srv.URL)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := e.Do(ctx, req)
		consume(b, resp, err)
	}
}

func BenchmarkClientDoParallel(b *testing.B) {
	srv, client := newLoopbackServer(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := benchRequest(b, srv.URL)
		for pb.Next() {
			resp, err := client.Do(req)
			consume(b, resp, err)
		}
	})
}

func BenchmarkExecutorDoParallel(b *testing.B) {
	srv, client := newLoopbackServer(b)
	// More slots than RunParallel's goroutines: measures overhead, not queueing.
	e := NewExecutor(client, WithMaxConcurrency(1024))
	defer e.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := benchRequest(b, srv.URL)
		for pb.Next() {
			resp, err := e.Do(ctx, req)
			consume(b, resp, err)
		}
	})
}

type staticBodyTransport struct{}

func (staticBodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: &fakeBody{r: strings.NewReader("ok"), leave: func() {}}, Request: r}, nil
}

func BenchmarkClientDoInMemory(b *testing.B) {
	client := &http.Client{Transport: staticBodyTransport{}}
	req := benchRequest(b, "http://api.example/")
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
	}
}

func BenchmarkExecutorDoInMemory(b *testing.B) {
	e := NewExecutor(&http.Client{Transport: staticBodyTransport{}})
	defer e.Close()
	req := benchRequest(b, "http://api.example/")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := e.Do(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		_ = resp.Body.Close()
	}
}
