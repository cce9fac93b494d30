package store_test

import (
	"context"
	"fmt"
	"time"

	"github.com/pacer-go/pacer/store"
)

// A limiter's side of the protocol: book a token, wait the delay the store
// grants (or give the token back with Cancel when giving up), and publish
// what the server said, here a Retry-After of 2 s, so that every limiter of
// the key keeps the pause.
func Example() {
	var s store.Store = store.NewMemory()
	ctx := context.Background()
	const key = "https://api.example.com"
	r := store.Request{Tokens: 1, Limit: 1, Burst: 1, MaxWait: 5 * time.Second}

	g, err := s.Reserve(ctx, key, r)
	if err != nil {
		panic(err)
	}
	fmt.Println("first:", g.OK, g.Delay)

	g, _ = s.Reserve(ctx, key, r)
	fmt.Println("second:", g.OK, g.Delay.Round(100*time.Millisecond))
	s.Cancel(key, r) // the caller gave up: the next one need not wait for it

	if err := s.Publish(ctx, key, store.State{Pause: 2 * time.Second}); err != nil {
		panic(err)
	}
	g, _ = s.Reserve(ctx, key, store.Request{Limit: store.Unlimited})
	fmt.Println("unlimited, paused:", g.OK, g.Delay.Round(100*time.Millisecond))
	// Output:
	// first: true 0s
	// second: true 1s
	// unlimited, paused: true 2s
}

func ExampleNewMemory() {
	// Two limiters (for example two pacer Transports) that use one Memory
	// share one bucket per key: here 2 requests per second with a burst of 2.
	mem := store.NewMemory()
	ctx := context.Background()
	for range 3 {
		g, err := mem.Reserve(ctx, "https://api.example.com", store.Request{Tokens: 1, Limit: 2, Burst: 2})
		if err != nil {
			panic(err)
		}
		fmt.Println(g.OK, g.Delay.Round(100*time.Millisecond))
	}
	// Output:
	// true 0s
	// true 0s
	// true 500ms
}
