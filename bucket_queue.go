package pacer

import (
	"context"
	"time"
)

// The queue: reservations and waiters whose grant time has not come, in
// arrival order, and the re-plan that recomputes their times when the limit,
// the burst or a pause changes, or one of them leaves.

// entry is one reservation in the queue of those whose time has not come.
// Its fields are guarded by Bucket.mu, except at of a Reservation's entry,
// which never changes once handed out.
type entry struct {
	n     int
	done  bool // granted (its time came) or withdrawn
	st    *state
	start int64 // the slot the tokens occupy, under st
	end   int64
	cost  int64
	at    int64   // grant time
	wt    *waiter // nil for a Reservation: its at is a promise and never moves
}

// waiter is an entry of a blocked WaitN.
type waiter struct {
	entry
	err     error       // a re-plan found the wait impossible; WaitN returns this
	limitAt int64       // latest acceptable grant time (deadline, maxWait)
	dlAt    int64       // the context's deadline, or noLimit
	wake    *time.Timer // fires at at
}

// withdrawLocked gives back e's tokens. If e is still queued it leaves the
// queue and the rest is re-planned. If it was already granted, its tokens
// come back only if no grant came after it.
func (b *Bucket) withdrawLocked(e *entry, now int64) {
	b.popDueLocked(now)
	if !e.done {
		// Still queued: the re-plan drops it (done) but starts from where
		// it started, so its slot goes to those behind it.
		e.done = true
		b.replanLocked(now, nil)
		return
	}
	if s := b.state(); e.st == s && e.cost > 0 {
		s.tat.CompareAndSwap(e.end, e.start)
	}
}

// popDueLocked drops the entries whose time has come from the queue: they
// are granted. (Grant times never decrease along the queue.)
func (b *Bucket) popDueLocked(now int64) {
	q := b.queue
	i := 0
	for i < len(q) && q[i].at <= now {
		q[i].done = true
		i++
	}
	if i > 0 {
		k := copy(q, q[i:])
		clear(q[k:])
		b.queue = q[:k]
	}
}

// replanLocked recomputes, in arrival order, when each queued entry is
// granted, under params np (nil: unchanged) and the current pause. It seals
// the current state so no fast path commits against it, and publishes a new
// one. Waiters whose time moved get their timer reset; waiters that can no
// longer be served in time fail.
func (b *Bucket) replanLocked(now int64, np *params) {
	old := b.state()
	tat := old.tat.Swap(sealed)
	b.popDueLocked(now)
	q := b.queue
	if len(q) > 0 && tat != q[len(q)-1].end {
		// A fast-path grant came after the queue, which it can only do once
		// every queued entry's time has come.
		for _, e := range q {
			e.done = true
		}
		clear(q)
		q = q[:0]
	}
	base := tat
	if len(q) > 0 {
		base = q[0].start
	}

	ns := &state{params: old.params, floor: minTime}
	if np != nil {
		ns.params = *np
	}
	p := &ns.params
	pausing := b.paused && b.pause > now
	switch {
	case np == nil:
		if pausing {
			base = max(base, p.eff(b.pause)+p.capacity)
		}
	case pausing:
		base = p.eff(b.pause) + p.capacity
	default:
		base = p.tatFor(old.level(base, now), now)
	}

	e := p.eff(now)
	end, prevAt := base, int64(minTime)
	kept := q[:0]
	for _, en := range q {
		if en.done { // withdrawn
			continue
		}
		cost := p.cost(en.n)
		var start, at int64
		var err error
		if en.wt == nil {
			start = max(end, p.eff(en.at))
			at = en.at
		} else {
			start = max(end, e)
			switch stop := start + cost; {
			case !p.inf && en.n > p.burst:
				err = errTooBig(en.n, p.burst)
			case p.inf:
				at = max(stop, now, prevAt)
			case p.frozen:
				if stop > p.capacity {
					err = errNever(en.n)
				}
				at = max(now, prevAt)
			default:
				if stop-e > maxSpan {
					err = errNever(en.n)
				}
				at = max(now, stop-p.capacity, prevAt)
			}
			if err == nil && at > en.wt.limitAt {
				err = tooLate(at, time.Now(), nanotime(), en.wt.dlAt)
			}
		}
		if err != nil {
			en.wt.err, en.done = err, true
			en.wt.wake.Reset(0)
			continue
		}
		en.st, en.start, en.end, en.cost = ns, start, min(start+cost, e+maxSpan+1), cost
		if en.wt != nil && at != en.at {
			en.at = at
			en.wt.wake.Reset(time.Duration(at - now))
		}
		end, prevAt = en.end, at
		kept = append(kept, en)
	}
	if len(kept) > 0 {
		// A promise (a fixed entry) can make a grant later than its slot
		// needs; newcomers must still not be granted before it.
		ns.floor = prevAt
	}
	clear(q[len(kept):])
	b.queue = kept
	ns.tat.Store(end)
	b.st.Store(ns)
}

// tooLate is the error for a wait that would end at at, past the waiter's
// context deadline dlAt or its maxWait; ref is a time read at now.
func tooLate(at int64, ref time.Time, now, dlAt int64) error {
	rle := &RateLimitError{RetryAt: fromNanos(at, ref, now)}
	if at >= dlAt {
		rle.Err = context.DeadlineExceeded
	}
	return rle
}
