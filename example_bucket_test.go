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
