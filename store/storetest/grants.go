package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/pacer-go/pacer/store"
)

// The cases of this file check Reserve and Cancel on one bucket: what a
// grant says, what a refusal books, and what Cancel gives back.

func testBurstThenLimit(t *testing.T, peers Peers, _ config) {
	s := peers()
	for i := range 3 {
		checkGrant(t, "token "+itoa(i+1)+" of a burst of 3", reserve(t, s, "k", req(1, 1, 3)), true, 0)
	}
	checkGrant(t, "token 4, at 1 per second", reserve(t, s, "k", req(1, 1, 3)), true, time.Second)
	checkGrant(t, "token 5", reserve(t, s, "k", req(1, 1, 3)), true, 2*time.Second)
}

func testBeyondBurst(t *testing.T, peers Peers, _ config) {
	s := peers()
	// Three tokens from a bucket of one at 1 per second: the first is there,
	// the other two come in 2 s, and the delay says when all three may be used.
	checkGrant(t, "3 tokens, burst 1", reserve(t, s, "k", req(3, 1, 1)), true, 2*time.Second)
	checkGrant(t, "the next token", reserve(t, s, "k", req(1, 1, 1)), true, 3*time.Second)
}

func testBurstBelowOne(t *testing.T, peers Peers, _ config) {
	s := peers()
	for _, burst := range []int{0, -5} {
		key := "burst" + itoa(burst)
		checkGrant(t, key+": first token", reserve(t, s, key, req(1, 1, burst)), true, 0)
		checkGrant(t, key+": second token, as with a burst of 1", reserve(t, s, key, req(1, 1, burst)), true, time.Second)
	}
}

func testZeroTokens(t *testing.T, peers Peers, _ config) {
	s := peers()
	for _, n := range []float64{0, -1} {
		checkGrant(t, "tokens "+ftoa(n), reserve(t, s, "k", req(n, 1, 2)), true, 0)
	}
	checkGrant(t, "the whole burst is still there", reserve(t, s, "k", req(2, 1, 2)), true, 0)
	checkGrant(t, "and nothing more", reserve(t, s, "k", req(1, 1, 2)), true, time.Second)
}

func testFractionalTokens(t *testing.T, peers Peers, _ config) {
	s := peers()
	checkGrant(t, "2.5 tokens of 3", reserve(t, s, "k", req(2.5, 1, 3)), true, 0)
	checkGrant(t, "1 more: half a token left", reserve(t, s, "k", req(1, 1, 3)), true, 500*time.Millisecond)
}

func testMaxWaitRefusal(t *testing.T, peers Peers, _ config) {
	s := peers()
	checkGrant(t, "the only token", reserve(t, s, "k", req(1, 1, 1)), true, 0)

	r := req(1, 1, 1)
	r.MaxWait = 300 * time.Millisecond
	checkGrant(t, "refused: it would come in 1 s", reserve(t, s, "k", r), false, time.Second)
	checkGrant(t, "nothing was booked: the next comes in 1 s, not 2", reserve(t, s, "k", req(1, 1, 1)), true, time.Second)
}

func testContextDeadline(t *testing.T, peers Peers, _ config) {
	s := peers()
	checkGrant(t, "the only token", reserve(t, s, "k", req(1, 1, 1)), true, 0)

	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	g, err := s.Reserve(ctx, "k", req(1, 1, 1)) // no MaxWait: the deadline bounds it
	if err != nil {
		t.Fatalf("Reserve under a 400 ms deadline: %v; want a refusal, not an error", err)
	}
	checkGrant(t, "refused by the 400 ms deadline", g, false, time.Second)
	checkGrant(t, "nothing was booked", reserve(t, s, "k", req(1, 1, 1)), true, time.Second)
}

func testEndedContext(t *testing.T, peers Peers, _ config) {
	s := peers()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		start := time.Now()
		_, err := s.Reserve(c.ctx, "k", req(1, 1, 1))
		if !errors.Is(err, c.want) {
			t.Errorf("Reserve with an ended context: %v, want %v", err, c.want)
		}
		// Publish may queue the update and return nil, but it must not wait.
		if err := s.Publish(c.ctx, "k", store.State{Limit: 1, Burst: 1}); err != nil && !errors.Is(err, c.want) {
			t.Errorf("Publish with an ended context: %v, want nil or %v", err, c.want)
		}
		checkNear(t, "time the two calls took with an ended context", 0, time.Since(start))
	}
	checkGrant(t, "the failed calls booked nothing", reserve(t, s, "k", req(1, 1, 1)), true, 0)
}

func testCancel(t *testing.T, peers Peers, _ config) {
	s := peers()
	checkGrant(t, "the burst of 2", reserve(t, s, "k", req(2, 1, 2)), true, 0)
	checkGrant(t, "a third token", reserve(t, s, "k", req(1, 1, 2)), true, time.Second)
	s.Cancel("k", req(1, 1, 2))
	flush(t, s)
	checkGrant(t, "after the third was cancelled, the next takes its place", reserve(t, s, "k", req(1, 1, 2)), true, time.Second)

	// Returning more than was taken fills the bucket, but never beyond the burst.
	s.Cancel("k", req(10, 1, 2))
	flush(t, s)
	checkGrant(t, "after cancelling 10: the burst of 2", reserve(t, s, "k", req(2, 1, 2)), true, 0)
	checkGrant(t, "and no more", reserve(t, s, "k", req(1, 1, 2)), true, time.Second)
}

func testCancelShared(t *testing.T, peers Peers, _ config) {
	a, b := peers(), peers()
	checkGrant(t, "a takes the burst of 2", reserve(t, a, "k", req(2, 1, 2)), true, 0)
	a.Cancel("k", req(1, 1, 2))
	flush(t, a)
	checkGrant(t, "b gets the token a cancelled at once", reserve(t, b, "k", req(1, 1, 2)), true, 0)
	checkGrant(t, "and then waits", reserve(t, b, "k", req(1, 1, 2)), true, time.Second)
}

func testInfiniteLimit(t *testing.T, peers Peers, _ config) {
	s := peers()
	for _, limit := range []float64{store.Unlimited, math.Inf(1)} {
		for range 5 {
			checkGrant(t, fmt.Sprintf("100 tokens at %v", limit), reserve(t, s, "k", req(100, limit, 1)), true, 0)
		}
	}
	checkGrant(t, "Unlimited and +Inf booked nothing", reserve(t, s, "k", req(1, 1, 1)), true, 0)
}

func testLimitChange(t *testing.T, peers Peers, _ config) {
	s := peers()
	checkGrant(t, "at 1/s", reserve(t, s, "k", req(1, 1, 1)), true, 0)
	// The booked token keeps its time (the bucket is full again in 1 s); the
	// next, at half the rate, comes 2 s after it was full.
	checkGrant(t, "at 0.5/s", reserve(t, s, "k", req(1, 0.5, 1)), true, time.Second)
	// At 4 per second (a burst of 1) the next comes once those are spent,
	// 3 s in, and the one after a quarter second later.
	checkGrant(t, "at 4/s", reserve(t, s, "k", req(1, 4, 1)), true, 3*time.Second)
	// A very slow limit, refused, changes nothing for the faster one.
	r := req(1, 0.01, 1)
	r.MaxWait = time.Millisecond
	if reserve(t, s, "k", r).OK {
		t.Errorf("a token at 0.01/s was granted within 1 ms")
	}
	checkGrant(t, "at 4/s again", reserve(t, s, "k", req(1, 4, 1)), true, 3250*time.Millisecond)
}

func testRefusalsDoNotCompoundDebt(t *testing.T, peers Peers, _ config) {
	s := peers()
	checkGrant(t, "the only token", reserve(t, s, "k", req(1, 1, 1)), true, 0)
	// Refused reservations at another limit change nothing.
	for range 5 {
		r := req(1, 0.5, 1)
		r.MaxWait = time.Millisecond
		checkGrant(t, "refused at 0.5/s", reserve(t, s, "k", r), false, time.Second)
	}
	checkGrant(t, "the next at 1/s", reserve(t, s, "k", req(1, 1, 1)), true, time.Second)
}

func testKeysIndependent(t *testing.T, peers Peers, _ config) {
	s := peers()
	checkGrant(t, "a", reserve(t, s, "a", req(1, 1, 1)), true, 0)
	checkGrant(t, "b, untouched by a", reserve(t, s, "b", req(1, 1, 1)), true, 0)
	checkGrant(t, "a again", reserve(t, s, "a", req(1, 1, 1)), true, time.Second)
}

func testBucketShared(t *testing.T, peers Peers, _ config) {
	a, b := peers(), peers()
	checkGrant(t, "a takes the burst", reserve(t, a, "k", req(2, 1, 2)), true, 0)
	checkGrant(t, "b waits for the next", reserve(t, b, "k", req(1, 1, 2)), true, time.Second)
	checkGrant(t, "a waits after b", reserve(t, a, "k", req(1, 1, 2)), true, 2*time.Second)
}
