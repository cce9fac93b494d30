package pacer

import (
	"context"
	"time"
)

// The queue: the record of every grant that can still be withdrawn, in
// arrival order, and the re-plan that replays it when the limit, the burst or
// a pause changes, or one of its grants is withdrawn.
//
// The record is what makes refunds exact. A grant can be withdrawn (a
// Reservation cancelled, a waiter giving up) until its time has passed, so
// every grant whose time is now or later is in the queue (except fast-path
// grants made while the queue is empty, which no one can withdraw and which
// come before everything queued after them). Each entry keeps prev, the
// bucket's tat just before it, so the queue is the complete history of the
// bucket from q[0].prev on, and a re-plan can replay it without the withdrawn
// entries: what it gives back is exactly what a bucket that never saw them
// would have, with every other grant at its time.

// entry is one grant on record in the queue. Its fields are guarded by
// Bucket.mu, except at of a fixed entry, which never changes once handed out.
type entry struct {
	n     int
	inQ   bool    // in the queue: on record, can still be withdrawn
	gone  bool    // withdrawn (or its wait failed): the next re-plan drops it
	fixed bool    // its time never moves: a Reservation, or a waiter whose time came
	prev  int64   // the tat before it: the end of the grant before it
	start int64   // the slot its tokens occupy (tat before and after, but for a
	end   int64   // grant made when the bucket had refilled: start > prev)
	at    int64   // grant time
	wt    *waiter // nil unless a blocked WaitN
}

// waiter is an entry of a blocked WaitN.
type waiter struct {
	entry
	err     error       // a re-plan found the wait impossible; WaitN returns this
	limitAt int64       // latest acceptable grant time (deadline, maxWait)
	dlAt    int64       // the context's deadline, or noLimit
	wake    *time.Timer // fires at at
}

// withdrawLocked gives back e's tokens if its time has not passed at now and
// it is on record: the queue is replayed without it, so the bucket is left as
// if e had never been granted, and the waiters behind it move up. It reports
// whether e was withdrawn.
func (b *Bucket) withdrawLocked(e *entry, now int64) bool {
	b.popDueLocked(now)
	if !e.inQ || e.at < now {
		return false
	}
	e.gone = true
	b.replanLocked(now, nil)
	return true
}

// popDueLocked drops from the record the grants whose time has passed: they
// can no longer be withdrawn. A grant at now stays: its holder may still give
// it up at that instant. (Grant times never decrease along the queue.)
func (b *Bucket) popDueLocked(now int64) {
	q := b.queue
	i := 0
	for i < len(q) && q[i].at < now {
		q[i].inQ = false
		i++
	}
	if i > 0 {
		k := copy(q, q[i:])
		clear(q[k:])
		b.queue = q[:k]
	}
}

// recordLocked appends e, just granted, to the queue. Before committing e's
// slot the caller marked its time (markRecorded), so that no fast path grants
// anything at that instant without the record.
func (b *Bucket) recordLocked(e *entry) {
	e.inQ = true
	b.queue = append(b.queue, e)
}

// markRecorded makes at the time of s's last recorded grant; mu is held, so
// it is the only writer. (Only a call with a stale time can record a grant
// earlier than the last; rec keeps the later one.)
func markRecorded(s *state, at int64) {
	if at > s.rec.Load() {
		s.rec.Store(at)
	}
}

// allowSlow is allowAt under the lock, for a time at the floor or at the last
// recorded grant's: a grant is
// recorded in the queue when the queue holds grants that can still be
// withdrawn, so that withdrawing them replays it.
func (b *Bucket) allowSlow(now int64, n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.popDueLocked(now)
	for {
		s := b.state()
		tat := s.tat.Load()
		var pl plan
		s.plan(&pl, tat, now, n)
		if pl.tooBig || pl.never || pl.at > now {
			return false
		}
		if pl.cost == 0 {
			return true
		}
		e := b.recordIfQueued(s, now, n, tat, pl)
		if !s.tat.CompareAndSwap(tat, pl.end) {
			continue
		}
		if e != nil {
			b.recordLocked(e)
		}
		return true
	}
}

// recordIfQueued prepares the record of a grant made at once (pl.at <= now)
// under the lock: it is needed only while the queue holds grants that can be
// withdrawn, which it comes after. It raises the floor (before the caller
// commits) and returns the entry to record, or nil.
func (b *Bucket) recordIfQueued(s *state, now int64, n int, tat int64, pl plan) *entry {
	if len(b.queue) == 0 || pl.cost == 0 {
		return nil
	}
	markRecorded(s, now)
	return &entry{n: n, fixed: true, prev: tat, start: pl.start, end: pl.end, at: now}
}

// replayQueue replays the queue q under params p from base at now (see
// replanLocked): fixed entries keep their times, withdrawn ones are
// dropped, waiters are granted as early as the replay allows or fail. It
// returns the entries kept, the tat after them and the last grant's time.
func replayQueue(q []*entry, p *params, base, now int64) (kept []*entry, end, prevAt int64) {
	e := p.eff(now)
	end, prevAt = base, int64(minTime)
	kept = q[:0]
	for _, en := range q {
		if en.gone {
			en.inQ = false
			continue
		}
		cost := p.cost(en.n)
		var start, at int64
		var err error
		if en.fixed {
			// Replayed as granted at its time: into the bucket as it
			// would be then, given the grants before it.
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
				err = tooLate(at, time.Now(), clockNow(), en.wt.dlAt)
			}
		}
		if err != nil {
			en.wt.err, en.gone, en.inQ = err, true, false
			en.wt.wake.Reset(0)
			continue
		}
		en.prev, en.start, en.end = end, start, min(start+cost, e+maxSpan+1)
		if !en.fixed && at != en.at {
			en.at = at
			en.wt.wake.Reset(time.Duration(at - now))
		}
		end, prevAt = en.end, at
		kept = append(kept, en)
	}
	return kept, end, prevAt
}

// replanLocked replays the queue, in arrival order, from the tat before its
// first entry, under params np (nil: unchanged) and the current pause: fixed
// entries keep their times, withdrawn ones are dropped, waiters are granted
// as early as the replay allows. It seals the current state so no fast path
// commits against it, and publishes a new one. Waiters whose time moved get
// their timer reset; waiters that can no longer be served in time fail.
func (b *Bucket) replanLocked(now int64, np *params) { b.replanFillLocked(now, np, 0) }

// replanFillLocked is replanLocked with new params np (not nil) that leave
// at least fill tokens in the bucket at now, before its queued waiters
// take theirs, where no pause holds it (see Adaptive.apply: what a quota
// says may go at once is in the bucket, whatever its pace left there).
func (b *Bucket) replanFillLocked(now int64, np *params, fill float64) {
	old := b.state()
	tat := old.tat.Swap(sealed)
	b.popDueLocked(now)
	q := b.queue
	if len(q) > 0 && tat != q[len(q)-1].end {
		// A fast path granted after the queue, which it can only do past
		// the floor, so past every queued time: now is before a grant
		// already made (a stale time). The record no longer holds the
		// whole history, so give nothing back: the queued grants stand
		// (a waiter among them is granted when its timer fires).
		for _, e := range q {
			e.inQ, e.fixed = false, true
		}
		clear(q)
		q = q[:0]
	}
	base := tat
	if len(q) > 0 {
		base = q[0].prev
	}

	ns := &state{params: old.params, floor: noFloor}
	ns.rec.Store(noFloor)
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
	default:
		// New params keep the level, read at now; but where the bucket is
		// in debt at now (its level would be below 0: now is stale, or
		// kept promises overdrew it), at the time the debt is paid off
		// at the old rate, so that the debt carries over. (Converting a
		// level clamped at 0 would forgive the debt and over-admit.)
		t := now
		if !old.inf && !old.frozen {
			t = max(now, base-old.capacity)
		}
		base = p.tatFor(old.level(base, t), t)
		if fill > 0 && !pausing {
			// (Before the queue: its waiters are re-planned from it.)
			base = min(base, p.tatFor(fill, now))
		}
		if pausing {
			// Empty when the pause ends, unless still in debt then.
			base = max(base, p.eff(b.pause)+p.capacity)
		}
	}

	kept, end, prevAt := replayQueue(q, p, base, now)
	if len(kept) > 0 {
		// A fixed entry can make a grant later than its slot needs;
		// newcomers must still not be granted before it, and no fast path
		// may grant at its time without the record.
		ns.floor = prevAt
		ns.rec.Store(prevAt)
	}
	clear(q[len(kept):])
	b.queue = kept
	ns.tat.Store(end)
	b.st.Store(ns)
}

// tooLate is the error for a wait that would end at at, past the waiter's
// context deadline dlAt or its maxWait; ref is a time read at now.
func tooLate(at int64, ref time.Time, now, dlAt int64) error {
	rle := &RateLimitError{RetryAt: clockTime(at, ref, now)}
	if at >= dlAt {
		rle.Err = context.DeadlineExceeded
	}
	return rle
}
