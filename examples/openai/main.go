// Command openai is an OpenAI-style chat client paced by pacer on both of the
// API's quotas: requests and tokens.
//
// It runs a simulated OpenAI API (internal/apisim, StyleOpenAI, with a token
// quota) on a loopback httptest server and sends 60 chat completions from 6
// workers. No request states its token cost: pacer learns both quotas from
// the x-ratelimit-* headers, learns what a completion costs the token quota
// from how its remaining tokens fall, and holds a request back until the
// token quota can cover it, instead of sending it into a 429. (A caller
// that knows a request's cost can state it with work.WithCost.)
//
//	go run ./examples/openai
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// Per 2-second window: 100 requests but only 12 000 tokens: the token
	// quota binds (about 30 requests of ~400 tokens).
	api := apisim.New(apisim.Config{
		Style:      apisim.StyleOpenAI,
		Limit:      100,
		TokenLimit: 12000,
		Window:     2 * time.Second,
	})
	srv := httptest.NewServer(api)
	defer srv.Close()

	tr := pacer.NewTransport(nil) // a 429 or 529 refused the completion before any work: pacer retries it
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	var ok, failed, tokens atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 10 {
				maxTokens := 300 + rng.IntN(200)
				n, err := complete(client, srv.URL, maxTokens)
				if err != nil {
					failed.Add(1)
					log.Print(err)
					continue
				}
				ok.Add(1)
				tokens.Add(int64(n))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	st := api.Stats()
	fmt.Fprintf(w, "done in %v: %d completions OK, %d failed, %d tokens; the server saw %d requests, %d of them 429\n",
		elapsed.Round(100*time.Millisecond), ok.Load(), failed.Load(), tokens.Load(), st.Requests, st.Throttled)
	for _, s := range tr.Stats() {
		fmt.Fprintf(w, "pacer endpoint %s: requests=%d throttled=%d retries=%d mode=%s\n",
			s.Key, s.Requests, s.Throttled, s.Retries, s.Mode)
		for _, c := range s.Costs {
			fmt.Fprintf(w, "  a completion costs the %s quota %.0f on average, as learnt (charged %.0f at admission)\n",
				c.Quota, c.Mean, c.Charged)
		}
	}
	if failed.Load() > 0 {
		return fmt.Errorf("%d of 60 completions failed", failed.Load())
	}
	return nil
}

// complete sends one chat completion whose prompt and answer take about
// maxTokens tokens, and returns the tokens it used.
func complete(client *http.Client, base string, maxTokens int) (int, error) {
	ctx := context.Background()
	body := fmt.Sprintf(`{"model":"gpt-sim","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, maxTokens)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	// The simulated server charges what this header says (a real one counts).
	req.Header.Set(apisim.TokensHeader, strconv.Itoa(maxTokens))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("chat completion: %s", resp.Status)
	}
	return maxTokens, nil
}
