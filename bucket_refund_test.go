package pacer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The promise these tests check (Reservation.Cancel): until a reservation's
// time has passed, cancelling it leaves the bucket exactly as if it had never
// been made, every other grant keeping its time. "As far as no later grant
// depends on them" is that replay: a later reservation granted at its time
// into the bucket without the cancelled one keeps whatever tokens it would
// have used there, and everything else comes back.

// snapshot describes what a bucket will do from t on without changing it:
// the tokens it reports at a few times, and when a single token would be
// granted. Two buckets with equal snapshots behave alike.
func snapshot(b *Bucket, t time.Time) string {
	s := ""
	for _, d := range []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second, time.Hour} {
		s += fmt.Sprintf("%.6f ", b.TokensAt(t.Add(d)))
	}
	r := b.ReserveNAt(t, 1)
	s += fmt.Sprintf("next %v", r.DelayFrom(t))
	r.CancelAt(t)
	return s
}

// permutations returns every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// A kept reservation's slot absorbed the idle time a faster
// limit turned into room; cancelling it must give that room back too.
func TestCancelReturnsIdleTimeTheSlotAbsorbed(t *testing.T) {
	t.Run("speed-up, then cancel", func(t *testing.T) {
		b := NewBucket(1, 1)
		require.True(t, b.AllowNAt(t0, 1))
		r := b.ReserveNAt(t0, 1)
		require.Equal(t, time.Second, r.DelayFrom(t0))
		b.SetLimitAt(t0, 1000)
		assert.Equal(t, time.Second, r.DelayFrom(t0), "the promise stands")
		r.CancelAt(t0)

		next := b.ReserveNAt(t0, 1)
		assert.Equal(t, time.Millisecond, next.DelayFrom(t0), "as if r had never been made")

		ref := NewBucket(1, 1)
		require.True(t, ref.AllowNAt(t0, 1))
		ref.SetLimitAt(t0, 1000)
		assert.Equal(t, time.Millisecond, ref.ReserveNAt(t0, 1).DelayFrom(t0), "the bucket that never saw r")
	})
	t.Run("slow-down while the reservation waits, then cancel", func(t *testing.T) {
		// 5/s, burst 2: r waits until 400ms; at 200ms the limit doubles
		// and r is cancelled: the bucket holds the one token it refilled
		// since t0 and refills at 10/s.
		b := NewBucket(5, 2)
		require.True(t, b.AllowNAt(t0, 2))
		r := b.ReserveNAt(t0, 2)
		require.Equal(t, 400*time.Millisecond, r.DelayFrom(t0))
		b.SetLimitAt(at(200*time.Millisecond), 10)
		r.CancelAt(at(200 * time.Millisecond))
		assert.InDelta(t, 1, b.TokensAt(at(200*time.Millisecond)), 1e-9)
		next := b.ReserveNAt(at(200*time.Millisecond), 2)
		assert.Equal(t, 100*time.Millisecond, next.DelayFrom(at(200*time.Millisecond)))
	})
	t.Run("the slot a waiter moved into", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := NewBucket(1, 1)
			require.True(t, b.Allow())
			start := time.Now()
			r := b.Reserve() // 1s
			w := startWaiter(context.Background(), b, 1, start)
			b.SetLimit(1000)
			r.Cancel()
			got, err := w.result()
			require.NoError(t, err)
			assert.Equal(t, time.Millisecond, got, "the waiter moves into the room r held")
		})
	})
}

// Cancelling several reservations gives back the same,
// whatever the order: the bucket ends as if none of them had been made.
func TestCancelOrderDoesNotChangeWhatIsReturned(t *testing.T) {
	t.Run("two reservations, both orders", func(t *testing.T) {
		for _, order := range []string{"AB", "BA"} {
			t.Run(order, func(t *testing.T) {
				b := NewBucket(10, 1)
				require.True(t, b.AllowNAt(t0, 1))
				rs := map[byte]*Reservation{'A': b.ReserveNAt(t0, 1), 'B': b.ReserveNAt(t0, 1)}
				require.Equal(t, 200*time.Millisecond, rs['B'].DelayFrom(t0))
				rs[order[0]].CancelAt(t0)
				rs[order[1]].CancelAt(t0)
				assert.Equal(t, 100*time.Millisecond, b.ReserveNAt(t0, 1).DelayFrom(t0),
					"the drained bucket's next token")
			})
		}
	})
	t.Run("random reservations, every order of cancels", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 2))
		for round := range 60 {
			limit := []Limit{1, 10, 333.3, 1000}[rng.IntN(4)]
			burst := 1 + rng.IntN(4)
			var ns []int
			for range 5 {
				ns = append(ns, 1+rng.IntN(burst))
			}
			cancelAt := at(time.Duration(rng.IntN(50)) * time.Millisecond)
			speedUp := rng.IntN(2) == 0
			build := func(reserve bool) (*Bucket, []*Reservation) {
				b := NewBucket(limit, burst)
				b.AllowNAt(t0, burst)
				var rs []*Reservation
				for _, n := range ns {
					if reserve {
						rs = append(rs, b.ReserveNAt(t0, n))
					}
				}
				if speedUp {
					b.SetLimitAt(t0, limit*3)
				}
				return b, rs
			}
			// Two to four of the five, in every order.
			victims := rng.Perm(5)[:2+rng.IntN(3)]
			var want string
			for _, perm := range permutations(len(victims)) {
				b, rs := build(true)
				for _, i := range perm {
					rs[victims[i]].CancelAt(cancelAt)
				}
				got := snapshot(b, cancelAt)
				if want == "" {
					want = got
				}
				require.Equal(t, want, got, "round %d, victims %v, order %v", round, victims, perm)
			}
			// All five, in a random order, while none is due (at t0): the
			// bucket that never saw them.
			b, rs := build(true)
			for _, i := range rng.Perm(5) {
				rs[i].CancelAt(t0)
			}
			ref, _ := build(false)
			require.Equal(t, snapshot(ref, t0), snapshot(b, t0), "round %d: all cancelled", round)
		}
	})
	t.Run("cancelling every reservation restores the bucket", func(t *testing.T) {
		b := NewBucket(10, 3)
		require.True(t, b.AllowNAt(t0, 3))
		ref := snapshot(b, t0)
		var rs []*Reservation
		for _, n := range []int{2, 1, 3, 1} {
			rs = append(rs, b.ReserveNAt(t0, n))
		}
		for _, i := range []int{2, 0, 3, 1} {
			rs[i].CancelAt(t0)
		}
		assert.Equal(t, ref, snapshot(b, t0))
	})
}

// CancelAt at the reservation's due time is cancelling
// before it: the same as a nanosecond earlier, whatever else happened at
// that instant; a nanosecond later it is too late.
func TestCancelAtDueTimeIsConsistent(t *testing.T) {
	due := at(100 * time.Millisecond)
	type setup struct {
		name string
		// between runs after the reservations and before the cancel, at
		// the due time.
		between func(b *Bucket)
	}
	setups := []setup{
		{"nothing else", func(*Bucket) {}},
		{"a failed Allow at that instant", func(b *Bucket) { b.AllowNAt(due, 1) }},
		{"a reservation made at that instant", func(b *Bucket) { b.ReserveNAt(due, 1) }},
		{"a limit change at that instant", func(b *Bucket) { b.SetLimitAt(due, 10) }},
	}
	for _, su := range setups {
		t.Run(su.name, func(t *testing.T) {
			run := func(cancel time.Time) string {
				// 10/s, burst 3: rA is due at 100ms, rB at 200ms.
				b := NewBucket(10, 3)
				require.True(t, b.AllowNAt(t0, 3))
				rA := b.ReserveNAt(t0, 1)
				rB := b.ReserveNAt(t0, 1)
				require.Equal(t, 100*time.Millisecond, rA.DelayFrom(t0))
				require.Equal(t, 200*time.Millisecond, rB.DelayFrom(t0))
				if !cancel.Before(due) {
					su.between(b)
				}
				rA.CancelAt(cancel)
				if cancel.Before(due) {
					su.between(b)
				}
				return snapshot(b, due.Add(time.Nanosecond))
			}
			before, atDue, after := run(due.Add(-time.Nanosecond)), run(due), run(due.Add(time.Nanosecond))
			assert.Equal(t, before, atDue, "at the due time = before it")
			assert.NotEqual(t, atDue, after, "after it, nothing comes back")
		})
	}
	t.Run("a waiter giving up at its grant time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := NewBucket(10, 1)
			require.True(t, b.Allow())
			start := time.Now()
			e, _, err := b.enqueue(context.Background(), 1, 0) // due at 100ms
			require.NoError(t, err)
			require.NotNil(t, e)
			later := startWaiter(context.Background(), b, 1, start) // 200ms
			time.Sleep(100 * time.Millisecond)
			b.mu.Lock()
			assert.True(t, b.withdrawLocked(&e.entry, clockNow()), "at its time it can still give up")
			b.mu.Unlock()
			e.wake.Stop()
			got, err := later.result()
			require.NoError(t, err)
			assert.Equal(t, 100*time.Millisecond, got, "the waiter behind moves into its slot")
		})
	})
	t.Run("a reservation granted at once, after other grants at that instant", func(t *testing.T) {
		b := NewBucket(10, 2)
		r := b.ReserveNAt(t0, 1)
		require.Zero(t, r.DelayFrom(t0))
		require.True(t, b.AllowNAt(t0, 1), "the second token")
		r.CancelAt(t0)
		assert.Equal(t, 1, allowed(b, t0, 3), "r's token is back, and only it")
	})
}
