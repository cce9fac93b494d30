// Command github is a GitHub-style API client paced by pacer.
//
// It runs a simulated GitHub API (internal/apisim, StyleGitHub) on a loopback
// httptest server, with the "core" resource and a much smaller "search"
// resource, and fans 8 workers out over both. The client has no configuration
// beyond pacer.NewTransport(nil): pacer learns each resource's quota from the
// X-RateLimit-* headers, notices from X-RateLimit-Resource that /search is a
// bucket of its own, and paces each so that neither is overrun.
//
//	go run ./examples/github
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run does the work and prints the summary to w; it fails if any request did.
func run(w io.Writer) error {
	// Per 2-second window: 120 core requests, 12 search requests.
	api := apisim.New(apisim.Config{
		Style:  apisim.StyleGitHub,
		Limit:  120,
		Window: 2 * time.Second,
		Routes: map[string]int{"/search/": 12},
	})
	srv := httptest.NewServer(api)
	defer srv.Close()

	tr := pacer.NewTransport(nil)
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	// The work: 200 repository reads and 25 code searches, in any order.
	jobs := make(chan string)
	go func() {
		defer close(jobs)
		for i := range 200 {
			jobs <- fmt.Sprintf("/repos/octo/project-%d", i)
			if i%8 == 0 {
				jobs <- fmt.Sprintf("/search/code?q=pacer+%d", i)
			}
		}
	}()

	start := time.Now()
	var (
		mu     sync.Mutex
		status = map[int]int{}
		failed int
		wg     sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for path := range jobs {
				resp, err := client.Get(srv.URL + path)
				mu.Lock()
				if err != nil {
					failed++
					log.Print(err)
				} else {
					status[resp.StatusCode]++
				}
				mu.Unlock()
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	st := api.Stats()
	fmt.Fprintf(w, "done in %v: %d × 200 OK, %d failed; the server answered %d requests, %d of them 429\n",
		elapsed.Round(100*time.Millisecond), status[http.StatusOK], failed, st.Requests, st.Throttled)
	fmt.Fprintln(w, "pacer's endpoints:")
	for _, s := range tr.Stats() {
		fmt.Fprintf(w, "  %-40s requests=%-4d throttled=%-2d retries=%-2d limit=%s mode=%s\n",
			s.Key, s.Requests, s.Throttled, s.Retries, rate(s.Limit), s.Mode)
	}
	if failed > 0 || status[http.StatusOK] != 225 {
		return fmt.Errorf("%d of 225 requests succeeded", status[http.StatusOK])
	}
	return nil
}

func rate(l pacer.Limit) string {
	if l == pacer.Inf {
		return "unlimited"
	}
	return fmt.Sprintf("%.1f/s", float64(l))
}
