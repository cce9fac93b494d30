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
// on that wait, and the charge. The rules are package quota's table
// (R1-R7, R52-R55, R63, R66); what a response teaches is in learn.go.

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

// acquire is Acquire for a request of the given class, setting p only when
// it admits the request.
func (a *Adaptive) acquire(ctx context.Context, p *Permit, cost float64, class work.Class) error {
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

// admit blocks until one request may start: a slow-start slot, a request
// token, and cost tokens of any token quota (cost ≤ 0 charges request
// quotas only). With a nil error the caller must settle the request exactly
// once. On cancellation it returns ctx.Err() promptly and refunds what it
// took; a wait past MaxWait, MaxDelay or ctx's deadline is a
// *RateLimitError that consumes nothing (R55).
func (a *Adaptive) admit(ctx context.Context, cost float64, class work.Class) ([]need, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if !(cost > 0) || math.IsInf(cost, 1) {
		cost = 0
	}
	// The caller counts as waiting until it is admitted or refused.
	a.waiting.Add(1)
	if class == work.Batch {
		a.batchWaiting.Add(1)
	}
	defer a.doneWaiting(class)
	w := caller{a: a, ctx: ctx, cost: a.noteCost(cost), class: class}
	w.n = int(math.Ceil(w.cost))
	for {
		seq, err := w.try()
		if err != nil {
			return nil, 0, err
		}
		if seq != 0 {
			if !w.held {
				a.inflight.Add(1)
			}
			return w.fleet, seq, nil
		}
	}
}

// doneWaiting counts a caller of the class out of the waiting ones.
func (a *Adaptive) doneWaiting(class work.Class) {
	a.waiting.Add(-1)
	if class == work.Batch {
		a.batchWaiting.Add(-1)
	}
}

// caller is one caller of Acquire on its way through admission.
type caller struct {
	a     *Adaptive
	ctx   context.Context
	cost  float64
	class work.Class
	n     int    // the cost in whole tokens
	held  bool   // an in-flight slot is taken through the gate
	fleet []need // what the fleet's budgets gave this pass
	// The pass's reading of the clock: ns on the package clock, now the
	// same instant as a time, zero until a step needs one.
	ns  int64
	now time.Time
	// mark and seen are the counts of responses applied and of changes
	// the pass's waits are computed after (see settled, awaitChange).
	mark, seen int64
}

// try is one pass of admission: the admission's place in order, or 0 to
// look again.
func (w *caller) try() (seq int64, err error) {
	a := w.a
	w.fleet = nil
	if !w.held && a.gated.Load() {
		if w.held, err = a.enterGate(w.ctx); err != nil {
			return 0, err
		}
	}
	w.readClock()
	tokens := w.n > 0 && a.tokensTracked()
	if w.class == work.Batch {
		w.instant() // a reserve's wait is a time (R63)
	}
	var spent time.Time
	switch {
	case a.share != nil || a.fleet != nil || tokens:
		spent = a.spentUntil(w.cost, w.class, w.ns, w.now)
	case !a.snap.Load().charged:
		// No quota known: only the request bucket's token.
		if a.req.take(1, w.ns) {
			return a.countAdmission(w.cost, w.class), nil
		}
	default:
		at, tried, s, retryAt := a.admitAtOnce(w.cost, w.class, w.ns, w.now, &w.held)
		switch {
		case s != 0:
			return s, nil
		case tried:
			w.release()
			return 0, a.awaitBudget(w.ctx, retryAt, w.mark, w.seen)
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
	s, retryAt := a.charge(w.cost, w.class, w.ns, &w.held)
	if s != 0 {
		return s, nil
	}
	a.fleet.giveBack(w.fleet)
	w.fleet = nil
	w.release()
	return 0, a.awaitBudget(w.ctx, retryAt, w.mark, w.seen)
}

// readClock reads the package clock for the pass (a request let through
// at once reads it once), rolls the quotas on when a look is due, and
// notes what the pass's waits are computed after.
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

// awaitQuota bounds the whole wait a spent budget or the token bucket asks
// for, up front (R55), and holds batch work for the quota outside the
// buckets, where a token it took would pace interactive work behind it.
// again reports that the pass is over.
func (w *caller) awaitQuota(spent time.Time, tokens bool) (again bool, err error) {
	a, now := w.a, w.instant()
	at := laterTime(a.req.nextAt(1), spent)
	if tokens {
		at = laterTime(at, a.tok.nextAt(w.n))
	}
	if err := a.tooLong(w.ctx, now, at); err != nil {
		w.release()
		return true, a.refuseOrAwait(w.ctx, now, at, err, w.mark, w.seen)
	}
	if w.class == work.Batch && spent.After(now) {
		w.release()
		return true, a.awaitChange(w.ctx, spent.Sub(now), w.seen)
	}
	return false, nil
}

// awaitBuckets waits for the request bucket's token and the token bucket's
// cost. The budgets are charged only after: a caller queued in a bucket
// holds no quota of a window that may end first, and a reset that passed
// meanwhile rolls the windows on first.
func (w *caller) awaitBuckets(tokens bool) error {
	a := w.a
	granted, err := a.waitBucketAt(w.ctx, a.req, 1, w.ns)
	if err == nil && tokens {
		granted, err = a.waitBucketAt(w.ctx, a.tok, w.n, granted)
	}
	if err != nil {
		w.release()
		return a.annotate(err)
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
// window's reset (the next answer when that is unknown). again reports that
// the pass is over.
func (w *caller) takeFleet() (again bool, err error) {
	a, now := w.a, w.instant()
	w.fleet = a.fleetNeeds(w.cost, w.class)
	ok, at, err := a.fleet.take(w.ctx, w.fleet, now, a.lanes.since(w.ns))
	switch {
	case err != nil:
		w.release()
		return true, err
	case ok:
		return false, nil
	}
	w.fleet = nil
	w.release()
	if at.IsZero() {
		at = now.Add(time.Second)
	}
	if err := a.tooLong(w.ctx, now, at); err != nil {
		return true, a.refuseOrAwait(w.ctx, now, at, err, w.mark, w.seen)
	}
	return true, a.awaitChange(w.ctx, at.Sub(now), w.seen)
}

// countAdmission counts an admitted request and returns its place in the
// order of admissions (1 for the first). Where a quota is charged it is
// called under mu with the charge: every request is then either counted
// in flight or already applied (R1).
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

// awaitBudget holds a caller whose charge a spent budget refused until the
// budget can take a request (retryAt), or, when a look is out (retryAt
// zero or past), until the next response. nil means look again.
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

// waitBucketAt waits for n tokens of b, planned at now on the package
// clock: from b itself, or from the store's bucket of the same key (but
// the token bucket of a fleet whose budget paces its token quotas). It
// returns when they were due.
func (a *Adaptive) waitBucketAt(ctx context.Context, b *Bucket, n int, now int64) (int64, error) {
	if a.share == nil || b == a.tok && a.budgetPaced() {
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

// settled reports whether no request of this limiter is in flight (a spent
// budget is final only then, R55), and whether a response was applied
// since mark. Read under mu, where responses are applied.
func (a *Adaptive) settled(mark int64) (settled, changed bool) {
	a.mu.Lock()
	defer a.unlock()
	return a.inflight.Load() == 0, a.applied.Load() != mark
}

// refuseOrAwait handles a wait too long to take (refusal, from tooLong): it
// is returned once nothing of ours is in flight, or at ctx's deadline;
// until then the caller waits for their answers, at most a second at a
// time. nil means look again.
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
// past ctx's deadline, MaxWait or MaxDelay (R55).
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

// annotate fills in the endpoint's key and last Info on the bucket's errors.
func (a *Adaptive) annotate(err error) error {
	var rle *RateLimitError
	if errors.As(err, &rle) {
		return a.rateLimitError(rle.RetryAt, rle.Err)
	}
	return err
}

// awaitChange blocks until the next change that may free a budget
// (changedLocked), or until d passes, at least minAwait. seen is the count
// of changes the caller read before it looked at what made it wait: a
// change since returns at once. Changes are counted under the lock this
// registers under, so none is missed.
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

// wakeGateLocked lets the callers waiting at the gate look again: a slot
// freed. Called with mu held.
func (a *Adaptive) wakeGateLocked() {
	if a.gated.Load() {
		close(a.gateWake)
		a.gateWake = make(chan struct{})
	}
}

// changedLocked counts a change that may free a budget (a response
// applied, a charge given back, a window rolled) and wakes the callers
// waiting for one. Called with mu held, once the change is made.
func (a *Adaptive) changedLocked() {
	a.changes.Add(1)
	if a.respWaiters > 0 {
		a.respWaiters = 0
		close(a.respWake)
		a.respWake = make(chan struct{})
	}
}

// setGateLocked raises (cap > 0) or lowers (cap 0) the in-flight cap.
// Called with mu held.
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

// noteCost records a stated cost: its running average, and the largest,
// which the token bucket's burst must hold (R66). It returns cost.
func (a *Adaptive) noteCost(cost float64) float64 {
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

// heldSlots is the in-flight count a caller holding a gate slot accounts
// for itself.
func heldSlots(held bool) int64 {
	if held {
		return 1
	}
	return 0
}

// charge takes the request from every known quota and returns its place in
// order; on failure seq is 0, nothing stays charged, and retryAt is when to
// look again. The charge and the request's entry in the in-flight count
// happen together under mu, where responses are applied: a response then
// either comes before the charge or counts the request as unseen (R1). now
// is the admission's reading of the package clock.
func (a *Adaptive) charge(cost float64, class work.Class, now int64, held *bool) (seq int64, retryAt time.Time) {
	if !a.snap.Load().charged {
		return a.countAdmission(cost, class), time.Time{}
	}
	a.mu.Lock()
	defer a.unlock()
	return a.chargeLocked(cost, class, now, timeOf(now), held)
}

// chargeLocked is charge with mu held, for a limiter whose quotas are known;
// at is the instant now.
func (a *Adaptive) chargeLocked(cost float64, class work.Class, now int64, at time.Time, held *bool) (seq int64, retryAt time.Time) {
	share, idleAt := a.lanes.share(class, now)
	flight := units(a.inflightCost.Load())
	if short, ok := a.book.Charge(cost, at, share, flight); !ok {
		// A window may have rolled over since the last look: retune first.
		t := time.Now()
		a.retune(t)
		nothingOut := a.inflight.Load() == heldSlots(*held)
		retryAt, reserved := a.book.Refused(short, cost, t, share, flight, nothingOut)
		if reserved && idleAt != 0 {
			retryAt = earlierTime(retryAt, clockTime(idleAt, t, clockOf(t))) // R63
		}
		return 0, retryAt
	}
	if !*held {
		a.inflight.Add(1)
		*held = true
	}
	return a.countAdmission(cost, class), time.Time{}
}

// admitAtOnce admits a request to a limiter whose quotas are known, without
// a Store or a token quota, in one section under mu: the budgets' look, the
// request bucket's token, the charge. tried reports that it went as far as
// the charge (seq, retryAt); otherwise spent is when the budgets could take
// the request, and the caller goes the general way.
func (a *Adaptive) admitAtOnce(cost float64, class work.Class, ns int64, now time.Time, held *bool) (spent time.Time, tried bool, seq int64, retryAt time.Time) {
	a.mu.Lock()
	defer a.unlock()
	if !a.snap.Load().charged { // published under mu: no quota known any more
		return time.Time{}, false, 0, time.Time{}
	}
	at := timeOf(ns)
	if spent = a.spentUntilLocked(cost, class, ns, at); !spent.IsZero() || !a.req.take(1, ns) {
		return spent, false, 0, time.Time{}
	}
	seq, retryAt = a.chargeLocked(cost, class, ns, at, held)
	return time.Time{}, true, seq, retryAt
}

// fleetNeeds is what a request of cost takes of each quota the fleet's
// budgets are kept for: the quotas this limiter knows.
func (a *Adaptive) fleetNeeds(cost float64, class work.Class) []need {
	a.mu.Lock()
	defer a.unlock()
	qs := a.book.Needs(nil, cost)
	if len(qs) == 0 {
		return nil
	}
	needs := make([]need, 0, len(qs))
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

// spentUntil is when the budgets could take a request of cost; zero when
// they can now. now is the instant ns, or zero.
func (a *Adaptive) spentUntil(cost float64, class work.Class, ns int64, now time.Time) time.Time {
	if !a.snap.Load().charged {
		return time.Time{}
	}
	a.mu.Lock()
	defer a.unlock()
	if now.IsZero() {
		now = timeOf(ns)
	}
	return a.spentUntilLocked(cost, class, ns, now)
}

// spentUntilLocked is spentUntil with mu held, for a limiter whose quotas
// are known.
func (a *Adaptive) spentUntilLocked(cost float64, class work.Class, ns int64, now time.Time) time.Time {
	share, idleAt := a.lanes.share(class, ns)
	at := a.book.SpentUntil(cost, share, now)
	if idleAt != 0 && !at.IsZero() {
		at = earlierTime(at, clockTime(idleAt, now, ns))
	}
	return at
}

// refund gives a request's charge back to every quota; called with mu held.
func (a *Adaptive) refund(cost float64) { a.book.Refund(cost) }

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
