package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/store"
)

// The cases of this file check the store under concurrent callers, hostile
// values and time: what no single call shows.

// testConcurrent books from several goroutines on two peers and checks the
// resulting schedule is a valid token bucket schedule: no window holds more
// than burst + window×limit tokens, and the schedule is not longer than
// needed.
func testConcurrent(t *testing.T, peers Peers, _ config) {
	const (
		limit      = 100
		burst      = 10
		goroutines = 8
		each       = 25
		n          = goroutines * each
	)
	stores := []store.Store{peers(), peers()}
	var (
		mu    sync.Mutex
		slots []time.Time
		fails atomic.Int32
		wg    sync.WaitGroup
	)
	start := time.Now()
	for i := range goroutines {
		wg.Go(func() {
			s := stores[i%len(stores)]
			for range each {
				g, err := s.Reserve(context.Background(), "k", req(1, limit, burst))
				if err != nil || !g.OK {
					fails.Add(1)
					continue
				}
				at := time.Now().Add(g.Delay)
				mu.Lock()
				slots = append(slots, at)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if f := fails.Load(); f > 0 {
		t.Fatalf("%d of %d unbounded reservations failed or were refused", f, n)
	}
	slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })

	interval := time.Second / limit
	for _, window := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond} {
		allowed := burst + int(window/interval) + 1
		maxIn := 0
		for i, j := 0, 0; j < len(slots); j++ {
			for slots[j].Sub(slots[i]) >= window-Tolerance/10 {
				i++
			}
			maxIn = max(maxIn, j-i+1)
		}
		if maxIn > allowed+1 {
			t.Errorf("%d tokens within %v, want at most %d", maxIn, window, allowed+1)
		}
	}
	span := slots[n-1].Sub(start)
	want := time.Duration(n-burst) * interval
	if d := span - want; d < -2*Tolerance || d > 2*Tolerance {
		t.Errorf("the schedule of %d tokens ends after %v, want %v ± %v", n, span, want, 2*Tolerance)
	}
}

// testConcurrentCancel has goroutines on two peers take a token and cancel
// it, publishing limits meanwhile: every token comes back, so the bucket is
// full at the end, and the limit read is one that was published.
func testConcurrentCancel(t *testing.T, peers Peers, _ config) {
	const (
		limit      = 100
		burst      = 10
		goroutines = 8
		each       = 25
	)
	stores := []store.Store{peers(), peers()}
	var wg sync.WaitGroup
	var fails atomic.Int32
	for i := range goroutines {
		wg.Go(func() {
			s := stores[i%len(stores)]
			for j := range each {
				r := req(1, limit, burst)
				g, err := s.Reserve(context.Background(), "k", r)
				if err != nil || !g.OK {
					fails.Add(1)
					continue
				}
				s.Cancel("k", r)
				if j%5 == 0 {
					if err := s.Publish(context.Background(), "k", store.State{Limit: float64(1 + i), Burst: 1}); err != nil {
						fails.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	if f := fails.Load(); f > 0 {
		t.Fatalf("%d calls failed or were refused", f)
	}
	for _, s := range stores {
		flush(t, s)
	}
	// Had Cancels been lost, 200 tokens at 100/s would leave 2 s of debt.
	g := reserve(t, stores[0], "k", req(burst, limit, burst))
	checkGrant(t, "the whole burst after every token was cancelled", g, true, 0)
	if l := g.Shared.Limit; l < 1 || l > goroutines || l != math.Trunc(l) {
		t.Errorf("the learned limit is %v, which nobody published", l)
	}
}

func testInvalid(t *testing.T, peers Peers, _ config) {
	s := peers()
	for _, limit := range []float64{0, -1, math.NaN()} {
		_, err := s.Reserve(context.Background(), "k", req(1, limit, 1))
		if err == nil {
			t.Errorf("Reserve at limit %v: no error", limit)
		}
		var rle *pacer.RateLimitError
		if errors.As(err, &rle) {
			t.Errorf("Reserve at limit %v: %v; an invalid request is not a rate limit", limit, err)
		}
	}
	for _, r := range []store.Request{
		req(math.NaN(), 1, 1), req(-3, 1, 1), req(math.Inf(1), 1, 1), req(1, 1, -5), req(1, 1e300, 0),
		req(1, 1e-300, 1),
	} {
		if g := reserve(t, s, "hostile", r); g.Delay < 0 {
			t.Errorf("Reserve(%+v): negative delay %v", r, g.Delay)
		}
	}
	s.Cancel("hostile", req(math.NaN(), 1, 1))
	s.Cancel("hostile", req(math.Inf(1), 1, 1))
	s.Cancel("never-used", req(1, 1, 1))
	publish(t, s, "hostile", store.State{Limit: math.NaN(), Pause: -time.Second})
	publish(t, s, "hostile", store.State{Limit: -1, Burst: -1})
	flush(t, s)
	if sh := reserve(t, s, "fresh", req(1, store.Unlimited, 1)).Shared; sh.Limit != 0 || sh.Pause != 0 {
		t.Errorf("a fresh key reads %+v after hostile calls on others", sh)
	}
}

// testIdleTTL checks DefaultStoreIdleTTL's promise at the TTL given with
// IdleTTL: a key is kept while calls keep touching it, and forgotten (its
// learned limit and its pause) once nobody used it for
// the TTL after its bucket refilled and its pause ended.
func testIdleTTL(t *testing.T, peers Peers, cfg config) {
	ttl := cfg.idleTTL
	if ttl == 0 {
		t.Skip("pass storetest.IdleTTL with the stores' idle TTL to check it")
	}
	a, b := peers(), peers()
	const refill, pause = 200 * time.Millisecond, 300 * time.Millisecond
	reserve(t, a, "k", req(2, 5, 1)) // 2 tokens at 5/s from a bucket of 1: refilled in 200 ms
	publish(t, a, "k", store.State{Limit: 3, Burst: 1, Pause: pause})
	flush(t, a)

	// Touched every third of the TTL, for twice the TTL: kept.
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); {
		time.Sleep(ttl / 3)
		if sh := reserve(t, b, "k", req(1, store.Unlimited, 1)).Shared; sh.Limit != 3 {
			t.Fatalf("the learned limit was forgotten while in use: %+v", sh)
		}
	}

	// Idle for the TTL and more: forgotten, for both peers.
	time.Sleep(ttl + max(refill, pause) + 2*Tolerance)
	for name, s := range map[string]store.Store{"publisher": a, "other": b} {
		if sh := reserve(t, s, "k", req(1, store.Unlimited, 1)).Shared; sh != (store.State{}) {
			t.Errorf("%s: an idle key still reads %+v after the TTL", name, sh)
		}
	}
}

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return fmt.Sprint(f) }
