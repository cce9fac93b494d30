package pacer

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/pacer-go/pacer/internal/quota"
)

// Admission: Acquire, the wait for a request's slot, budget and token, and
// every bound on that wait (its Permit is settled by Done or Abandon).

// admit blocks until one request may start: a slow-start slot, a request
// token, and cost tokens of any token-denominated quota (cost ≤ 0 charges
// request quotas only); Acquire's body. It returns a nil error when the
// caller may send, and the caller must then settle the request exactly
// once (its Permit's Done or Abandon). On cancellation it returns ctx.Err()
// promptly and refunds what it took. When the wait would exceed MaxWait,
// MaxDelay or ctx's deadline it returns a *RateLimitError without
// consuming anything: at once, or, while requests of ours are in flight,
// once their answers show the quota is spent (see settled).
func (a *Adaptive) admit(ctx context.Context, cost float64, class Class) ([]need, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if !(cost > 0) || math.IsInf(cost, 1) {
		cost = 0
	}
	// The caller counts as waiting until it is admitted or refused. One
	// deferred call before one return is compiled inline; in the loop's
	// function, with its many returns, the two it took were kept on the
	// stack and run by the runtime: 2% of a request's cost.
	a.waiting.Add(1)
	if class == Batch {
		a.batchWaiting.Add(1)
	}
	defer a.doneWaiting(class)
	return a.admitWaiting(ctx, cost, class)
}

// doneWaiting counts a caller of the class out of the waiting ones.
func (a *Adaptive) doneWaiting(class Class) {
	a.waiting.Add(-1)
	if class == Batch {
		a.batchWaiting.Add(-1)
	}
}

// admitWaiting is admit's loop, for a caller counted as waiting.
func (a *Adaptive) admitWaiting(ctx context.Context, cost float64, class Class) ([]need, int64, error) {
	held := false // in-flight slot taken through the gate
	release := func() {
		if held {
			held = false
			a.mu.Lock()
			a.inflight.Add(-1)
			a.wakeGateLocked()
			a.mu.Unlock()
		}
	}
	cost = a.noteCost(cost)
	n := int(math.Ceil(cost))
	var taken []need // what the fleet's budgets gave
	var seq int64    // the admission's place in order (countAdmission)
admission:
	for {
		if !held && a.gated.Load() {
			var err error
			if held, err = a.enterGate(ctx); err != nil {
				return nil, 0, err
			}
		}
		// The package clock (monotonic only, half the cost of time.Now)
		// is all a request let through at once needs; now, the time.Time,
		// is made only for a step that works with one (a retune, a wait to
		// bound), and stands for the same instant as ns.
		var now time.Time
		ns := clockNow()
		a.lanes.note(class, ns)
		if ns >= a.snap.Load().checkAt {
			now = time.Now()
			ns = clockOf(now)
			a.mu.Lock()
			a.retune(now)
			a.unlock()
		}
		// What the waits below are computed from: a refusal is final only
		// if no response changed it since (see settled), and a wait for a
		// change ends at once if one came since (see awaitChange).
		mark, seen := a.applied.Load(), a.changes.Load()
		// The request bucket's wait enforces MaxWait and the deadline by
		// itself, taking nothing when it fails. A spent budget, or a second
		// bucket for tokens, needs the whole wait known up front.
		tokens := n > 0 && a.tokensTracked()
		if now.IsZero() && class == Batch {
			// A reserve's wait is a time (see spentUntil).
			t := time.Now() // for the wall clock: now is the instant ns
			now = clockTime(ns, t, clockOf(t))
		}
		var spent time.Time
		switch {
		case a.share != nil || a.fleet != nil || tokens:
			spent = a.spentUntil(cost, class, ns, now)
		case !a.snap.Load().charged:
			// No quota known: nothing to look at or charge, only the
			// request bucket's token, taken here if it is there (the
			// bucket's wait below starts with the same look).
			if a.req.take(1, ns) {
				seq = a.countAdmission(cost, class)
				break admission
			}
		default:
			// The steps below, under one lock, when nothing makes the
			// request wait (see admitAtOnce).
			at, tried, s, retryAt := a.admitAtOnce(cost, class, ns, now, &held)
			if s != 0 {
				seq = s
				break admission
			}
			if tried {
				release()
				if err := a.awaitBudget(ctx, retryAt, mark, seen); err != nil {
					return nil, 0, err
				}
				continue
			}
			spent = at
		}
		if tokens || !spent.IsZero() {
			if now.IsZero() {
				t := time.Now() // for the wall clock: now is the instant ns
				now = clockTime(ns, t, clockOf(t))
			}
			at := laterTime(a.req.nextAt(1), spent)
			if tokens {
				at = laterTime(at, a.tok.nextAt(n))
			}
			if err := a.tooLong(ctx, now, at); err != nil {
				release()
				if err := a.refuseOrAwait(ctx, now, at, err, mark, seen); err != nil {
					return nil, 0, err
				}
				continue
			}
			if class == Batch && spent.After(now) {
				// Batch work waits for the quota out of the buckets: a
				// token taken now would only be spent on a charge the
				// budget refuses, and pace interactive work behind it.
				release()
				if err := a.awaitChange(ctx, spent.Sub(now), seen); err != nil {
					return nil, 0, err
				}
				continue
			}
		}
		// ns is passed on so that a request let through at once reads the
		// clock once (granted is then ns itself); after a sleep granted is
		// a fresh reading.
		granted, err := a.waitBucketAt(ctx, a.req, 1, ns)
		if err != nil {
			release()
			return nil, 0, a.annotate(err)
		}
		if tokens {
			if granted, err = a.waitBucketAt(ctx, a.tok, n, granted); err != nil {
				release()
				return nil, 0, a.annotate(err)
			}
		}
		// The budgets are charged only now, at admission: a caller queued in
		// the bucket must not hold quota of a window that may end first. A
		// reset may have passed while it waited (the usual end of a pause):
		// the windows move on first.
		if granted > ns {
			if now = time.Now(); clockOf(now) >= a.snap.Load().checkAt {
				a.mu.Lock()
				a.retune(now)
				a.unlock()
			}
			ns = clockOf(now)
		}
		var fleet []need
		if a.fleet != nil {
			if now.IsZero() {
				t := time.Now() // for the wall clock: now is the instant ns
				now = clockTime(ns, t, clockOf(t))
			}
			fleet = a.fleetNeeds(cost, class)
			ok, at, err := a.fleet.take(ctx, fleet, now, a.lanes.since(ns))
			if err != nil {
				release()
				return nil, 0, err
			}
			if !ok {
				// The fleet's budget is spent: wait for its window's
				// reset, or for the next answer when that is unknown.
				release()
				if at.IsZero() {
					at = now.Add(time.Second)
				}
				if err := a.tooLong(ctx, now, at); err != nil {
					if err := a.refuseOrAwait(ctx, now, at, err, mark, seen); err != nil {
						return nil, 0, err
					}
					continue
				}
				if err := a.awaitChange(ctx, at.Sub(now), seen); err != nil {
					return nil, 0, err
				}
				continue
			}
		}
		s, retryAt := a.charge(cost, class, ns, &held)
		if s != 0 {
			taken, seq = fleet, s
			break
		}
		a.fleet.giveBack(fleet)
		release()
		if err := a.awaitBudget(ctx, retryAt, mark, seen); err != nil {
			return nil, 0, err
		}
	}
	if !held {
		a.inflight.Add(1)
	}
	return taken, seq, nil
}

// countAdmission counts an admitted request of the given cost and class
// and returns its place in the order of admissions (1 for the first).
// Where a quota is charged it is called under mu with the charge
// (chargeLocked): a response applied between the two would set a budget
// from a figure that may not count the request, without its cost among
// those unseen, and the next charge would not find it in flight.
func (a *Adaptive) countAdmission(cost float64, class Class) int64 {
	a.admitted.Add(1)
	seq := a.admissions.Add(1)
	if class == Batch {
		a.batchAdmits.Add(1)
	}
	if cost > 0 {
		// Blind requests (no stated cost, nearly all) are the rest of
		// the counts: they pay for no counter of their own.
		a.inflightCost.Add(quota.ToMilli(cost))
		a.admittedCost.Add(quota.ToMilli(cost))
		a.hinted.Add(1)
		a.hintedAdmits.Add(1)
	}
	return seq
}

// awaitBudget holds a caller whose charge a spent budget refused (charge)
// until the budget can take a request: its reset, or its refill (retryAt),
// or, when that is unknown because a request is out to learn the quota
// (retryAt zero or past), the next response. The caller then starts over:
// the buckets, paused until then, pace the restart. nil means look again;
// mark and seen are as for refuseOrAwait.
func (a *Adaptive) awaitBudget(ctx context.Context, retryAt time.Time, mark, seen int64) error {
	now := time.Now()
	switch {
	case retryAt.IsZero():
		return nil
	case !retryAt.After(now):
		return a.awaitChange(ctx, time.Second, seen)
	}
	if err := a.tooLong(ctx, now, retryAt); err != nil {
		return a.refuseOrAwait(ctx, now, retryAt, err, mark, seen)
	}
	return a.awaitChange(ctx, retryAt.Sub(now), seen)
}

// waitBucketAt waits for n tokens of b, planning at now on the package
// clock: from b itself without a store (a grant at once is now itself),
// else from the store's bucket of the same key (the store reads its own
// clock). It returns when they were due.
func (a *Adaptive) waitBucketAt(ctx context.Context, b *Bucket, n int, now int64) (int64, error) {
	if a.share == nil || b == a.tok && a.budgetPaced() {
		// (A fleet's budget paces its token quotas: the store's token
		// bucket, shared by every member, would pace them all at one
		// member's plan; see budgetPacedLocked.)
		return b.wait(ctx, n, a.cfg.MaxWait, now)
	}
	at, err := a.share.wait(ctx, a, b, n, b == a.tok)
	return clockOf(at), err
}

// budgetPaced is budgetPacedLocked for a caller without the lock.
func (a *Adaptive) budgetPaced() bool {
	if a.fleet == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.budgetPacedLocked()
}

// Acquire waits until one request of the given cost may start and returns
// its Permit. The request goes at once while every quota the server states
// affords it; see [Adaptive] for when it waits. cost is the request's
// estimated cost in the units of token-denominated quotas (≤ 0 charges
// request quotas only).
//
// It returns ctx.Err() promptly when ctx is done while waiting, and a
// *RateLimitError at once, without waiting or taking anything, when the wait
// would pass ctx's deadline, MaxWait or MaxDelay. On any error nothing stays
// charged and there is nothing to settle.
func (a *Adaptive) Acquire(ctx context.Context, cost float64) (Permit, error) {
	var p Permit
	err := a.acquire(ctx, &p, cost, ClassOf(ctx))
	return p, err
}

// acquire is Acquire for a request of the given class (the Transport reads
// it from the context with the request's other marks), setting p only when
// it admits the request. (Into p, field by field: returned, the permit was
// stored word by word and copied whole into the attempt, and the copy
// stalled on store forwarding; see response.Read.)
func (a *Adaptive) acquire(ctx context.Context, p *Permit, cost float64, class Class) error {
	fleet, seq, err := a.admit(ctx, cost, class)
	if err != nil {
		return err
	}
	if !(cost > 0) || math.IsInf(cost, 1) {
		cost = 0
	}
	p.a, p.cost, p.live, p.fleet, p.seq = a, cost, true, fleet, seq
	return nil
}

// settled reports whether no request of this limiter is in flight. While
// some are, a spent budget may not be final: it counts them as unseen
// though the server may already have counted them (the last requests of a
// job that fits the quota exactly), and their answers may free some. A wait
// too long to take is refused only once they are in (or at the caller's
// deadline). Read under mu: a response settles its request and sets the
// budgets under mu, so the count is never seen at zero before the last
// response's figures are in. And only if no response was applied since mark
// (applied, read before the refused wait was computed): the last answer of
// a job that fits the quota exactly can come in between and give the
// budget its last unit back (once in about 40 runs, a job of 9,500 onto
// 9,500 left lost its last request).
func (a *Adaptive) settled(mark int64) (settled, changed bool) {
	a.mu.Lock()
	defer a.unlock()
	return a.inflight.Load() == 0, a.applied.Load() != mark
}

// refuseOrAwait handles a wait too long to take (refusal, from tooLong):
// returned at once when nothing of ours is in flight (see settled), else
// held back while their answers come in (at most a second at a time, then
// the caller looks again), and returned if ctx's deadline passes meanwhile
// (the context's error if it is cancelled instead). nil means look again.
// mark and seen are the counts the refused wait was computed after
// (applied, changes).
func (a *Adaptive) refuseOrAwait(ctx context.Context, now, at time.Time, refusal error, mark, seen int64) error {
	switch settled, changed := a.settled(mark); {
	case settled && changed:
		return nil // look again at what the last answers left
	case settled:
		return refusal
	}
	if err := a.awaitChange(ctx, min(at.Sub(now), time.Second), seen); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return refusal
		}
		return err
	}
	return nil
}

// tooLong returns a *RateLimitError when a request could start only at at,
// past MaxWait or ctx's deadline.
func (a *Adaptive) tooLong(ctx context.Context, now, at time.Time) error {
	wait := at.Sub(now)
	if wait <= 0 {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && at.After(dl) {
		return a.rateLimitError(at, context.DeadlineExceeded)
	}
	if a.cfg.MaxWait > 0 && wait > a.cfg.MaxWait {
		return a.rateLimitError(at, nil)
	}
	if wait > a.cfg.MaxDelay {
		// No wait is longer than MaxDelay: a daily quota spent this
		// morning is refused at once, with its reset, not slept on.
		return a.rateLimitError(at, nil)
	}
	return nil
}

func (a *Adaptive) rateLimitError(at time.Time, cause error) *RateLimitError {
	a.mu.Lock()
	info := a.lastInfoLocked()
	a.unlock()
	return &RateLimitError{Endpoint: a.cfg.Key, RetryAt: at, Info: info, Err: cause}
}

// annotate fills in the endpoint's key and last Info on the bucket's errors.
func (a *Adaptive) annotate(err error) error {
	var rle *RateLimitError
	if errors.As(err, &rle) {
		return a.rateLimitError(rle.RetryAt, rle.Err)
	}
	return err
}

// awaitChange blocks until the next response or retune that may free a
// budget, or until d passes (so a response that never comes cannot strand
// the caller). d is at least minAwait: a budget model that keeps promising
// "any moment now" must not turn Acquire's loop into a busy loop.
//
// seen is the count of changes (changedLocked) as the caller read it
// before it looked at the state that made it wait: if a change came since,
// it returns at once. The caller looks at the budgets and registers here
// in two steps; a response applied in between (its wake-up finding nobody
// registered) would otherwise be missed, and the caller would sleep until
// d although the response freed what it waits for: the last answers of a
// job that fits the quota exactly give the budget its last unit back, and
// a caller that missed them (woken by the answer before, it looked while
// the last ones were applied) waited for the next window, a minute.
// Changes are counted under the lock this registers under, so the check
// is exact: a change is either counted before it, or wakes the caller.
func (a *Adaptive) awaitChange(ctx context.Context, d time.Duration, seen int64) error {
	d = max(d, minAwait)
	a.mu.Lock()
	if a.changes.Load() != seen {
		a.mu.Unlock()
		return nil
	}
	a.respWaiters++
	wake := a.respWake
	a.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-wake:
		return nil
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// minAwait is the shortest pause of Acquire's loop on a spent budget.
const minAwait = time.Millisecond

// enterGate waits for an in-flight slot while the gate is up. held reports
// whether a slot was taken (the in-flight count already includes it).
func (a *Adaptive) enterGate(ctx context.Context) (held bool, err error) {
	for {
		a.mu.Lock()
		if !a.gated.Load() {
			a.mu.Unlock()
			return false, nil
		}
		if a.inflight.Load() < a.gateCap {
			a.inflight.Add(1)
			a.mu.Unlock()
			return true, nil
		}
		wake := a.gateWake
		a.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// wakeGateLocked lets the callers waiting at the gate look again: a slot
// freed. Called with the lock held.
func (a *Adaptive) wakeGateLocked() {
	if a.gated.Load() {
		close(a.gateWake)
		a.gateWake = make(chan struct{})
	}
}

// changedLocked counts a change that may free a budget (a response
// applied, a charge given back, a window rolled) and wakes the callers
// waiting for one (awaitChange). Called with the lock held, once the
// change is made: a caller registering later sees it counted.
func (a *Adaptive) changedLocked() {
	a.changes.Add(1)
	if a.respWaiters > 0 {
		a.respWaiters = 0
		close(a.respWake)
		a.respWake = make(chan struct{})
	}
}

// setGateLocked raises (cap > 0) or lowers (cap 0) the in-flight cap.
// Called with the lock held (by retune).
func (a *Adaptive) setGateLocked(cap int64) {
	if cap > 0 {
		a.gateCap = cap
		a.gated.Store(true)
		return
	}
	if a.gated.Load() {
		a.gated.Store(false)
		close(a.gateWake)
		a.gateWake = make(chan struct{})
	}
}

func (a *Adaptive) tokensTracked() bool { return a.snap.Load().tokens }

// noteCost records the largest cost seen, so the token bucket's burst can
// always hold one request, and returns cost unchanged.
func (a *Adaptive) noteCost(cost float64) float64 {
	m := quota.ToMilli(cost)
	if m > 0 {
		// A racy EWMA is fine: it only sizes what counts as "spent".
		if avg := a.avgCost.Load(); avg == 0 {
			a.avgCost.Store(m)
		} else {
			a.avgCost.Store(avg + (m-avg)/16)
		}
	}
	// A new largest cost resizes the token bucket's burst, which must hold
	// it. Raised by compare-and-swap: stored blindly, a smaller cost read
	// beside a larger one could overwrite it, the burst was sized for the
	// smaller, and the larger request, too big for it, was refused with a
	// wait of forever (once in a run of the package's tests: 64 callers of
	// varied stated costs on an Anthropic-style token quota).
	for old := a.maxCost.Load(); m > old; old = a.maxCost.Load() {
		if a.maxCost.CompareAndSwap(old, m) {
			if a.tokensTracked() {
				a.mu.Lock()
				a.retune(time.Now())
				a.unlock()
			}
			break
		}
	}
	return cost
}
