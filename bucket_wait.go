package pacer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

func errTooBig(n, burst int) error {
	return fmt.Errorf("pacer: wait for %d tokens exceeds the bucket's burst of %d", n, burst)
}

func errNever(n int) error {
	return fmt.Errorf("pacer: wait for %d tokens would never end: the limit is 0 (or the wait is longer than 73 years)", n)
}

var errNegative = errors.New("pacer: wait for a negative number of tokens")

// Wait is WaitN(ctx, 1).
func (b *Bucket) Wait(ctx context.Context) error {
	_, err := b.wait(ctx, 1, 0, useClock)
	return err
}

// WaitN blocks until n tokens are granted, then takes them. Waiters are
// served in arrival order; each sleeps on its own timer and wakes when its turn
// comes (or earlier if a SetLimit, SetBurst or PauseUntil re-plans it).
//
// It returns an error at once, taking nothing, when n > burst (unless the
// limit is Inf), when n < 0, when the limit is 0 and too few tokens are left,
// or when the tokens would not be granted before ctx's deadline; the last is a
// [*RateLimitError] whose RetryAt says when they would have been and whose Err
// is [context.DeadlineExceeded]. If ctx ends while waiting, WaitN returns
// ctx's error promptly and gives the tokens back to the waiters behind it. A
// re-plan that pushes the grant past ctx's deadline fails the wait the same
// way, at once.
//
// WaitN(ctx, 0) returns nil at once unless ctx is already done.
func (b *Bucket) WaitN(ctx context.Context, n int) error {
	_, err := b.wait(ctx, n, 0, useClock)
	return err
}

// nextAt reports when n tokens could be granted if asked for now, without
// taking them: now if at once. When they never could be (n > burst, limit 0
// with too few tokens), it returns a time about 73 years away.
func (b *Bucket) nextAt(n int) time.Time {
	ref := time.Now()
	now := clockOf(ref)
	if n <= 0 {
		return ref
	}
	s, tat := b.load()
	var pl plan
	s.plan(&pl, tat, now, n)
	if pl.tooBig || pl.never {
		return clockTime(now+maxSpan, ref, now)
	}
	return clockTime(max(pl.at, now), ref, now)
}

// wait is the core of Wait and WaitN, and the adaptive limiter's wait on
// its buckets; it returns the grant time on the package clock. now is the
// time to plan the fast path at (a grant at once returns it), or useClock
// to read the clock. A reading a little old only makes the fast path
// stricter (the bucket holds fewer tokens at an earlier time, and a time
// before a grant on record takes the slow path, which reads the clock).
//
// With maxWait > 0, or a deadline on ctx, wait is capped: when the tokens
// would not be granted within maxWait or before the deadline, it returns
// at once, taking nothing, a *RateLimitError whose RetryAt is when the n
// tokens would be granted and whose Err is context.DeadlineExceeded when
// the deadline was the reason, nil when maxWait was (Endpoint and Info are
// left for the caller to fill). The same holds if a re-plan later pushes
// the grant past either bound.
func (b *Bucket) wait(ctx context.Context, n int, maxWait time.Duration, now int64) (int64, error) {
	if n < 0 {
		return 0, errNegative
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if now == useClock {
		now = clockNow()
	}
	if n == 0 || b.take(n, now) {
		return now, nil
	}
	e, at, err := b.enqueue(ctx, n, maxWait)
	if err != nil {
		return 0, err
	}
	if e == nil {
		return at, nil
	}
	defer e.wake.Stop()
	for {
		select {
		case <-ctx.Done():
			// Given up before its time (at that instant included): the
			// tokens go back as a cancelled Reservation's do. After it,
			// they were granted and stay taken, as x/time/rate's do.
			b.mu.Lock()
			if e.err == nil {
				b.withdrawLocked(&e.entry, clockNow())
			}
			err := e.err
			b.mu.Unlock()
			if err != nil {
				return 0, err
			}
			return 0, ctx.Err()
		case <-e.wake.C:
			b.mu.Lock()
			if e.err != nil {
				b.mu.Unlock()
				return 0, e.err
			}
			now := clockNow()
			if e.at <= now {
				// Granted. The entry stays on record (fixed) until its
				// time has passed, so that a grant withdrawn before it at
				// this instant is replayed with it.
				e.fixed = true
				b.mu.Unlock()
				return e.at, nil
			}
			// A re-plan moved the grant later (and reset the timer already;
			// resetting it again to the same time is harmless).
			e.wake.Reset(time.Duration(e.at - now))
			b.mu.Unlock()
		}
	}
}

// enqueue is the slow path of wait: under the lock it plans the wait, fails
// it at once if it cannot end in time, and otherwise queues a waiter. It
// returns a nil entry and the grant time when the tokens were granted at once.
func (b *Bucket) enqueue(ctx context.Context, n int, maxWait time.Duration) (*waiter, int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ref := time.Now()
	now := clockOf(ref)
	b.popDueLocked(now)
	dlAt, limitAt := int64(noLimit), int64(noLimit)
	if dl, ok := ctx.Deadline(); ok {
		// A grant at the deadline itself is useless: the request would go
		// out with an expired context.
		dlAt = clockOf(dl)
		limitAt = dlAt - 1
	}
	if maxWait > 0 {
		limitAt = min(limitAt, now+int64(min(maxWait, time.Duration(maxSpan))))
	}
	for {
		s := b.state()
		tat := s.tat.Load()
		var pl plan
		s.plan(&pl, tat, now, n)
		switch {
		case pl.tooBig:
			return nil, 0, errTooBig(n, s.burst)
		case pl.never:
			return nil, 0, errNever(n)
		case pl.at > limitAt:
			return nil, 0, tooLate(pl.at, ref, now, dlAt)
		}
		if pl.at <= now {
			rec := b.recordIfQueued(s, now, n, tat, pl)
			if pl.cost != 0 && !s.tat.CompareAndSwap(tat, pl.end) {
				continue
			}
			if rec != nil {
				b.recordLocked(rec)
			}
			return nil, now, nil
		}
		markRecorded(s, pl.at)
		if pl.cost != 0 && !s.tat.CompareAndSwap(tat, pl.end) {
			continue
		}
		w := &waiter{
			entry:   entry{n: n, prev: tat, start: pl.start, end: pl.end, at: pl.at},
			limitAt: limitAt, dlAt: dlAt,
			wake: time.NewTimer(time.Duration(pl.at - now)),
		}
		w.wt = w
		b.recordLocked(&w.entry)
		return w, 0, nil
	}
}
