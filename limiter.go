package pacer

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/pacer-go/pacer/store"

	"github.com/pacer-go/pacer/work"
)

// Admission: the wait for a request's slot, budget and tokens, every bound
// on that wait, and the charge (R1-R7, R52-R55, R63, R66).

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
	err := a.acquire(ctx, &p, cost, work.ClassOf(ctx))
	return p, err
}

// acquire is Acquire for a class, setting p only when it admits the request.
func (a *Adaptive) acquire(ctx context.Context, p *Permit, cost float64, class work.Class) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !(cost > 0) || math.IsInf(cost, 1) {
		cost = 0
	}
	a.waiting.Add(1)
	if class == work.Batch {
		a.batchWaiting.Add(1)
	}
	defer func() {
		a.waiting.Add(-1)
		if class == work.Batch {
			a.batchWaiting.Add(-1)
		}
	}()
	a.noteCost(cost)
	w := caller{a: a, ctx: ctx, cost: cost, class: class, n: int(math.Ceil(cost))}
	for {
		seq, err := w.try()
		if err != nil {
			w.release()
			return err
		}
		if seq != 0 {
			if !w.held {
				a.inflight.Add(1)
			}
			p.a, p.cost, p.live, p.fleet, p.seq = a, cost, true, w.fleet, seq
			return nil
		}
	}
}

// caller is one caller of Acquire on its way through admission.
type caller struct {
	a     *Adaptive
	ctx   context.Context
	cost  float64
	class work.Class
	n     int       // the cost in whole tokens
	held  bool      // an in-flight slot is taken through the gate
	fleet []need    // what the fleet's budgets gave this pass
	ns    int64     // the pass's reading of the package clock
	now   time.Time // the same instant, zero until a step needs it
	mark  int64     // the count of responses applied the pass read (see await)
	seen  int64     // the count of changes the pass read (see awaitChange)
}

// try is one pass of admission: the admission's place in order, or 0 to
// look again. The budgets are charged last: a caller queued in a bucket
// holds no quota of a window that may end first.
func (w *caller) try() (seq int64, err error) {
	a := w.a
	w.fleet = nil
	if !w.held && a.gated.Load() {
		if w.held, err = a.enterGate(w.ctx); err != nil {
			return 0, err
		}
	}
	w.readClock()
	tokens := w.n > 0 && a.snap.Load().tokens
	if w.class == work.Batch {
		w.instant() // a reserve's wait is a time (R63)
	}
	var spent time.Time
	switch {
	case a.share != nil || a.fleet != nil || tokens:
		spent = w.spentUntil()
	case !a.snap.Load().charged:
		// No quota known: only the request bucket's token.
		if a.req.take(1, w.ns) {
			return a.countAdmission(w.cost, w.class), nil
		}
	default:
		at, tried, s, retryAt := w.admitAtOnce()
		switch {
		case s != 0:
			return s, nil
		case tried:
			return 0, w.awaitBudget(retryAt)
		}
		spent = at
	}
	if tokens || !spent.IsZero() {
		if again, err := w.awaitQuota(spent, tokens); again || err != nil {
			return 0, err
		}
	}
	if err := w.awaitBuckets(tokens); err != nil {
		return 0, err
	}
	if a.fleet != nil {
		if again, err := w.takeFleet(); again || err != nil {
			return 0, err
		}
	}
	if !a.snap.Load().charged {
		return a.countAdmission(w.cost, w.class), nil
	}
	a.mu.Lock()
	s, retryAt := w.chargeLocked()
	a.unlock()
	if s != 0 {
		return s, nil
	}
	a.fleet.giveBack(w.fleet)
	w.fleet = nil
	return 0, w.awaitBudget(retryAt)
}

// readClock reads the clock for the pass, rolls the quotas on when a look
// is due, and notes what the pass's waits are computed after.
func (w *caller) readClock() {
	a := w.a
	w.ns, w.now = clockNow(), time.Time{}
	a.lanes.note(w.class, w.ns)
	if w.ns >= a.snap.Load().checkAt {
		w.now = time.Now()
		w.ns = clockOf(w.now)
		a.mu.Lock()
		a.retune(w.now)
		a.unlock()
	}
	w.mark, w.seen = a.applied.Load(), a.changes.Load()
}

// instant is the pass's instant as a time, on the wall clock.
func (w *caller) instant() time.Time {
	if w.now.IsZero() {
		t := time.Now()
		w.now = clockTime(w.ns, t, clockOf(t))
	}
	return w.now
}

// release gives back the in-flight slot taken through the gate.
func (w *caller) release() {
	if !w.held {
		return
	}
	w.held = false
	a := w.a
	a.mu.Lock()
	a.inflight.Add(-1)
	a.wakeGateLocked()
	a.mu.Unlock()
}

// awaitQuota bounds the wait a spent budget or the token bucket asks for up
// front (R55), and holds batch work outside the buckets, where a token it
// took would pace interactive work behind it. again: the pass is over.
func (w *caller) awaitQuota(spent time.Time, tokens bool) (again bool, err error) {
	a, now := w.a, w.instant()
	at := laterTime(a.req.nextAt(1), spent)
	if tokens {
		at = laterTime(at, a.tok.nextAt(w.n))
	}
	refusal := a.tooLong(w.ctx, now, at)
	if refusal == nil {
		if w.class != work.Batch || !spent.After(now) {
			return false, nil
		}
		at = spent
	}
	return true, w.await(now, at, refusal)
}

// awaitBuckets waits for the request bucket's token and the token bucket's
// cost, and rolls the quotas on when a look fell due meanwhile.
func (w *caller) awaitBuckets(tokens bool) error {
	a := w.a
	granted, err := a.waitBucketAt(w.ctx, a.req, 1, w.ns)
	if err == nil && tokens {
		granted, err = a.waitBucketAt(w.ctx, a.tok, w.n, granted)
	}
	if err != nil {
		var rle *RateLimitError
		if errors.As(err, &rle) { // the bucket's: with the endpoint's key and Info
			return a.rateLimitError(rle.RetryAt, rle.Err)
		}
		return err
	}
	if granted > w.ns {
		if w.now = time.Now(); clockOf(w.now) >= a.snap.Load().checkAt {
			a.mu.Lock()
			a.retune(w.now)
			a.unlock()
		}
		w.ns = clockOf(w.now)
	}
	return nil
}

// takeFleet takes the request from the fleet's budgets, or waits for their
// reset (a second when unknown). again: the pass is over.
func (w *caller) takeFleet() (again bool, err error) {
	a, now := w.a, w.instant()
	w.fleet = a.fleetNeeds(w.cost, w.class)
	ok, at, err := a.fleet.take(w.ctx, w.fleet, now, a.lanes.since(w.ns))
	if ok || err != nil {
		return err != nil, err
	}
	w.fleet = nil
	if at.IsZero() {
		at = now.Add(time.Second)
	}
	return true, w.await(now, at, a.tooLong(w.ctx, now, at))
}

// awaitBudget holds a caller a spent budget refused until it can take a
// request (retryAt), or, when a look is out (retryAt zero or past), until
// the next response. nil: look again.
func (w *caller) awaitBudget(retryAt time.Time) error {
	w.release()
	now := time.Now()
	switch {
	case retryAt.IsZero():
		return nil
	case !retryAt.After(now):
		return w.a.awaitChange(w.ctx, time.Second, w.seen)
	}
	return w.await(now, retryAt, w.a.tooLong(w.ctx, now, retryAt))
}

// await gives back the caller's slot and holds it until at, or a change
// before. A refusal (from tooLong) is returned once nothing of ours is in
// flight (R55) or at ctx's deadline; until then the caller waits for their
// answers, a second at most at a time. nil: look again.
func (w *caller) await(now, at time.Time, refusal error) error {
	w.release()
	a := w.a
	if refusal == nil {
		return a.awaitChange(w.ctx, at.Sub(now), w.seen)
	}
	a.mu.Lock() // responses are applied under mu
	settled, changed := a.inflight.Load() == 0, a.applied.Load() != w.mark
	a.unlock()
	switch {
	case settled && changed:
		return nil // look again at what the last answers left
	case settled:
		return refusal
	}
	err := a.awaitChange(w.ctx, min(at.Sub(now), time.Second), w.seen)
	if errors.Is(err, context.DeadlineExceeded) {
		return refusal
	}
	return err
}

// spentUntil is when the budgets could take the request; zero: now.
func (w *caller) spentUntil() time.Time {
	a := w.a
	if !a.snap.Load().charged {
		return time.Time{}
	}
	a.mu.Lock()
	defer a.unlock()
	now := w.now
	if now.IsZero() {
		now = timeOf(w.ns)
	}
	return w.spentUntilLocked(now)
}

// spentUntilLocked is spentUntil with mu held, for a limiter whose quotas
// are known; now is the instant w.ns.
func (w *caller) spentUntilLocked(now time.Time) time.Time {
	share, idleAt := w.a.lanes.share(w.class, w.ns)
	at := w.a.book.SpentUntil(w.cost, share, now)
	if idleAt != 0 && !at.IsZero() {
		at = earlierTime(at, clockTime(idleAt, now, w.ns))
	}
	return at
}

// admitAtOnce admits the request of a limiter whose quotas are known, without
// a Store or a token quota, in one section under mu: the budgets' look, the
// request bucket's token, the charge (tried: seq, retryAt). Else the caller
// goes the general way from spent, when the budgets could take it: in one
// section, one they no longer cover waits rather than fail a charge (whose
// retune and Refused move the model).
func (w *caller) admitAtOnce() (spent time.Time, tried bool, seq int64, retryAt time.Time) {
	a := w.a
	a.mu.Lock()
	defer a.unlock()
	if !a.snap.Load().charged { // published under mu: no quota known any more
		return time.Time{}, false, 0, time.Time{}
	}
	if spent = w.spentUntilLocked(timeOf(w.ns)); !spent.IsZero() || !a.req.take(1, w.ns) {
		return spent, false, 0, time.Time{}
	}
	seq, retryAt = w.chargeLocked()
	return time.Time{}, true, seq, retryAt
}

// chargeLocked takes the request from every known quota and returns its
// place in order, or 0, nothing charged, and when to look again (retryAt).
// Called with mu held, where responses are applied (R1).
func (w *caller) chargeLocked() (seq int64, retryAt time.Time) {
	a := w.a
	share, idleAt := a.lanes.share(w.class, w.ns)
	flight := units(a.inflightCost.Load())
	if short, ok := a.book.Charge(w.cost, timeOf(w.ns), share, flight); !ok {
		// A window may have rolled over since the last look: retune first.
		t := time.Now()
		a.retune(t)
		out := a.inflight.Load()
		if w.held {
			out-- // the caller's own slot
		}
		retryAt, reserved := a.book.Refused(short, w.cost, t, share, flight, out == 0)
		if reserved && idleAt != 0 {
			retryAt = earlierTime(retryAt, clockTime(idleAt, t, clockOf(t))) // R63
		}
		return 0, retryAt
	}
	if !w.held {
		a.inflight.Add(1)
		w.held = true
	}
	return a.countAdmission(w.cost, w.class), time.Time{}
}

// countAdmission counts an admitted request and returns its seq (from 1).
func (a *Adaptive) countAdmission(cost float64, class work.Class) int64 {
	a.admitted.Add(1)
	seq := a.admissions.Add(1)
	if class == work.Batch {
		a.batchAdmits.Add(1)
	}
	if cost > 0 {
		a.inflightCost.Add(thousandths(cost))
		a.admittedCost.Add(thousandths(cost))
		a.hinted.Add(1)
		a.hintedAdmits.Add(1)
	}
	return seq
}

// waitBucketAt waits for n tokens of b, planned at now (package clock), and
// returns when they were due: from the store's bucket of b's key, but b's
// own without a Store or for the tokens of a fleet its budget paces.
func (a *Adaptive) waitBucketAt(ctx context.Context, b *Bucket, n int, now int64) (int64, error) {
	local := a.share == nil
	if !local && b == a.tok && a.fleet != nil {
		a.mu.Lock()
		local = a.budgetPacedLocked()
		a.mu.Unlock()
	}
	if local {
		return b.wait(ctx, n, a.cfg.MaxWait, now)
	}
	at, err := a.share.wait(ctx, a, b, n, b == a.tok)
	return clockOf(at), err
}

// tooLong refuses a wait until at past R55's bounds (*RateLimitError), or nil.
func (a *Adaptive) tooLong(ctx context.Context, now, at time.Time) error {
	wait := at.Sub(now)
	switch dl, ok := ctx.Deadline(); {
	case wait <= 0:
		return nil
	case ok && at.After(dl):
		return a.rateLimitError(at, context.DeadlineExceeded)
	case a.cfg.MaxWait > 0 && wait > a.cfg.MaxWait, wait > a.cfg.MaxDelay:
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

// awaitChange blocks until the next change (changedLocked) or until d, at
// least minAwait, passes; at once when the count of changes is no longer
// seen. It registers under the lock changes are counted under.
func (a *Adaptive) awaitChange(ctx context.Context, d time.Duration, seen int64) error {
	a.mu.Lock()
	if a.changes.Load() != seen {
		a.mu.Unlock()
		return nil
	}
	a.respWaiters++
	wake := a.respWake
	a.mu.Unlock()
	timer := time.NewTimer(max(d, minAwait))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-timer.C:
	}
	return nil
}

// minAwait is the shortest pause of admission on a spent budget: no busy
// loop on a model that keeps promising "any moment now".
const minAwait = time.Millisecond

// enterGate waits for an in-flight slot while the gate is up (R52, R53).
// held reports whether a slot was taken (the in-flight count includes it).
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

// wakeGateLocked lets the callers waiting at the gate look again; mu held.
func (a *Adaptive) wakeGateLocked() {
	if a.gated.Load() {
		close(a.gateWake)
		a.gateWake = make(chan struct{})
	}
}

// changedLocked counts a change made under mu that may free a budget (a
// response, a refund, a roll) and wakes awaitChange's callers.
func (a *Adaptive) changedLocked() {
	a.changes.Add(1)
	if a.respWaiters > 0 {
		a.respWaiters = 0
		close(a.respWake)
		a.respWake = make(chan struct{})
	}
}

// setGateLocked raises (cap > 0) or lowers (cap 0) the in-flight cap; mu held.
func (a *Adaptive) setGateLocked(cap int64) {
	if cap > 0 {
		a.gateCap = cap
		a.gated.Store(true)
		return
	}
	a.wakeGateLocked()
	a.gated.Store(false)
}

// noteCost records a stated cost: its running average, and the largest,
// which the token bucket's burst must hold (R66).
func (a *Adaptive) noteCost(cost float64) {
	m := thousandths(cost)
	if m > 0 {
		// A racy average is fine: it only sizes what counts as spent.
		if avg := a.avgCost.Load(); avg == 0 {
			a.avgCost.Store(m)
		} else {
			a.avgCost.Store(avg + (m-avg)/16)
		}
	}
	// Raised by compare-and-swap: a smaller cost stored over a larger one
	// would size the burst too small for the larger.
	for old := a.maxCost.Load(); m > old; old = a.maxCost.Load() {
		if a.maxCost.CompareAndSwap(old, m) {
			if a.snap.Load().tokens {
				a.mu.Lock()
				a.retune(time.Now())
				a.unlock()
			}
			break
		}
	}
}

// later queues f to run once mu is released; called with mu held. Logging,
// Store calls and callbacks never run under the lock.
func (a *Adaptive) later(f func()) { a.outbox = append(a.outbox, f) }

// unlock releases mu, then runs what was queued under it.
func (a *Adaptive) unlock() {
	out := a.outbox
	a.outbox = nil
	a.mu.Unlock()
	for _, f := range out {
		f()
	}
}

// fleetNeeds is what a request of cost takes of each quota this limiter
// knows, for the fleet's budgets, with batch work's reserve (R7, R63).
func (a *Adaptive) fleetNeeds(cost float64, class work.Class) []need {
	a.mu.Lock()
	defer a.unlock()
	qs := a.book.Needs(nil, cost)
	needs := make([]need, 0, len(qs)) // the fleet reads only their len
	for _, q := range qs {
		n := need{quota: q.Quota, amount: q.Amount}
		if class == work.Batch && !q.Looking {
			r := a.lanes.reserve
			n.reserve = &store.Reserve{Active: r.Share * q.Limit, Floor: r.Floor * q.Limit, Idle: r.Idle}
		}
		needs = append(needs, n)
	}
	return needs
}

// thousand is the scale of the limiter's atomic counts of stated costs:
// thousandths of a token, so that admissions and settles cancel exactly.
const thousand = 1000

// thousandths is v in thousandths, rounded up; 0 for v ≤ 0 or NaN, and
// bounded far below overflow.
func thousandths(v float64) int64 {
	if !(v > 0) {
		return 0
	}
	return int64(math.Ceil(min(v, math.MaxInt64/(2*thousand)) * thousand))
}

// units converts thousandths to units.
func units(m int64) float64 { return float64(m) / thousand }

// timeOf is the instant ns on the package clock.
func timeOf(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }
