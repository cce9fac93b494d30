package pacer

import (
	"time"
)

// Reservation holds tokens taken by [Bucket.ReserveN] for an event that may
// happen after [Reservation.Delay]. Its time does not move once it is handed
// out, even if the bucket's limit changes. The bucket keeps it on record until
// its time has passed, so that [Reservation.Cancel] can give back exactly
// what it took. Its methods are safe for concurrent use.
type Reservation struct {
	b        *Bucket
	ok       bool
	canceled bool // guarded by b.mu
	e        entry
}

// Reserve is ReserveN(1).
func (b *Bucket) Reserve() *Reservation { return b.reserveAt(useClock, 1) }

// ReserveN takes n tokens now, for an event that may happen after the
// returned Reservation's Delay. The caller must wait that long before acting,
// or Cancel the reservation to give the tokens back. Later reservations and
// waiters queue behind it; Allow cannot take the tokens it set aside.
//
// The reservation is not OK (and took nothing) when the tokens can never be
// had: n > burst, n < 0, or a limit of 0 with too few tokens left.
// ReserveN(0) is OK with no delay and takes nothing.
func (b *Bucket) ReserveN(n int) *Reservation { return b.reserveAt(useClock, n) }

// ReserveNAt is ReserveN at time t, for callers with their own clock:
// x/time/rate's ReserveN(t, n).
func (b *Bucket) ReserveNAt(t time.Time, n int) *Reservation { return b.reserveAt(clockOf(t), n) }

func (b *Bucket) reserveAt(now int64, n int) *Reservation {
	r := &Reservation{b: b, e: entry{n: n, fixed: true}}
	if n < 0 {
		return r
	}
	// Always under the lock: a reservation goes on record even when it is
	// granted at once, so that cancelling it can replay what came after.
	b.mu.Lock()
	defer b.mu.Unlock()
	if now == useClock {
		now = clockNow()
	}
	if n == 0 {
		r.ok, r.e.at = true, now
		return r
	}
	b.popDueLocked(now)
	for {
		s := b.state()
		tat := s.tat.Load()
		var pl plan
		s.plan(&pl, tat, now, n)
		if pl.tooBig || pl.never {
			return r
		}
		// A grant that takes no tokens (limit Inf) goes on record only
		// to keep its place behind a pause; it has nothing to give back.
		record := pl.cost != 0 || pl.at > now
		if record {
			markRecorded(s, pl.at)
		}
		if pl.cost != 0 && !s.tat.CompareAndSwap(tat, pl.end) {
			continue
		}
		r.ok = true
		r.e.prev, r.e.start, r.e.end, r.e.at = tat, pl.start, pl.end, pl.at
		if record {
			b.recordLocked(&r.e)
		}
		return r
	}
}

// OK reports whether the reservation holds its tokens. A reservation that is
// not OK can never be fulfilled (see [Bucket.ReserveN]) and took nothing.
func (r *Reservation) OK() bool { return r.ok }

// Delay is how long the holder must wait before acting: 0 if it may act now,
// [InfDuration] if the reservation is not OK.
func (r *Reservation) Delay() time.Duration { return r.DelayFrom(time.Now()) }

// DelayFrom is Delay measured from t.
func (r *Reservation) DelayFrom(t time.Time) time.Duration {
	if !r.ok {
		return InfDuration
	}
	return time.Duration(max(0, r.e.at-clockOf(t)))
}

// Cancel tells the bucket the holder will not act. Until the reservation's
// time has passed (at that instant included), its tokens are given back as
// far as no later grant depends on them: the bucket is left exactly as if the
// reservation had never been made, every other reservation keeping its time,
// so the order of several cancels does not matter. Waiters queued behind it
// move up. After its time, Cancel does nothing (the holder may have acted).
// Cancel is idempotent.
func (r *Reservation) Cancel() { r.cancelAt(useClock) }

// CancelAt is Cancel at time t.
func (r *Reservation) CancelAt(t time.Time) { r.cancelAt(clockOf(t)) }

func (r *Reservation) cancelAt(now int64) {
	if !r.ok || r.e.n == 0 {
		return
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.canceled {
		return
	}
	r.canceled = true
	if now == useClock {
		now = clockNow()
	}
	b.withdrawLocked(&r.e, now)
}
