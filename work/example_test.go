package work_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/work"
)

// A batch job and an interactive caller share one quota: the job spends
// what the quota affords at once, but leaves a tenth of it to interactive
// work, which then goes at once too.
func ExampleWithClass() {
	api := &apisim.Fixed{Limit: 100, Reset: time.Now().Add(time.Hour)}
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
	job := pacer.NewExecutor(client, pacer.WithDefaultClass(work.Batch), pacer.WithMaxConcurrency(1))
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

// LLM APIs limit tokens as well as requests. WithCost tells the limiter how
// many tokens a request will use, so it is held back until the token quota
// the server advertised can cover it.
func ExampleWithCost() {
	api := apisim.New(apisim.Config{Style: apisim.StyleOpenAI, Limit: 500, TokenLimit: 30000, Window: time.Minute})
	client := &http.Client{Transport: pacer.NewTransport(api.Transport())}

	prompt := "Summarise the pacer README in one sentence."
	estimate := float64(len(prompt)/4 + 256) // prompt tokens + max_tokens
	ctx := work.WithCost(context.Background(), estimate)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.openai.example/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-x","max_tokens":256}`))
	req.Header.Set(apisim.TokensHeader, "267") // what the simulated server charges
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}
