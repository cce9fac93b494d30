package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pacer-go/pacer"
)

// A bucket of 10 events per second with a burst of 3: three events go at
// once, the fourth must wait for a refill.
func ExampleBucket_Allow() {
	b := pacer.NewBucket(10, 3)
	for i := 1; i <= 4; i++ {
		fmt.Println(i, b.Allow())
	}
	// Output:
	// 1 true
	// 2 true
	// 3 true
	// 4 false
}

// Wait blocks until a token is granted, in arrival order, or fails at once
// when the context's deadline comes before the token would.
func ExampleBucket_Wait() {
	b := pacer.NewBucket(pacer.Every(time.Hour), 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	fmt.Println(b.Wait(ctx)) // the burst token: granted at once
	err := b.Wait(ctx)       // the next token is an hour away: fails at once
	fmt.Println(err != nil, errors.Is(err, context.DeadlineExceeded))
	// Output:
	// <nil>
	// true true
}

// ReserveN takes tokens now and says how long to wait before acting; Cancel
// gives them back if the caller changes its mind.
func ExampleBucket_ReserveN() {
	b := pacer.NewBucket(1, 1) // one per second
	b.Allow()                  // spend the burst

	r := b.ReserveN(1)
	fmt.Println(r.OK(), r.Delay().Round(100*time.Millisecond))
	if r.Delay() > 500*time.Millisecond {
		r.Cancel() // too long for us; give the token back
	}
	// Output: true 1s
}

// The *At variants take the time from the caller: the bucket's pure core,
// for tests and simulations with their own clock.
func ExampleBucket_AllowNAt() {
	b := pacer.NewBucket(2, 2) // two per second, burst 2
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{0, 0, 0, 499 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		fmt.Printf("at +%v: %v\n", d, b.AllowNAt(start.Add(d), 1))
	}
	// Output:
	// at +0s: true
	// at +0s: true
	// at +0s: false
	// at +499ms: false
	// at +500ms: true
	// at +1s: true
}

// SetLimit keeps the tokens in the bucket and refills at the new rate from
// then on; callers blocked in Wait are re-planned at once.
func ExampleBucket_SetLimit() {
	b := pacer.NewBucket(10, 10)
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	b.AllowNAt(start, 6)
	b.SetLimitAt(start, 100)
	fmt.Println(b.TokensAt(start), b.TokensAt(start.Add(10*time.Millisecond)))
	// Output: 4 5
}

// PauseUntil holds the bucket, for example until a server's Retry-After
// has passed; it is empty when the pause ends, so waiters are then paced at
// the limit instead of firing all at once.
func ExampleBucket_PauseUntil() {
	b := pacer.NewBucket(10, 5)
	b.PauseUntil(time.Now().Add(time.Minute))
	fmt.Println(b.Allow(), b.Tokens())
	// Output: false 0
}
