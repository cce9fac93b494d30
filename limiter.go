package pacer

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/internal/header"
	"github.com/pacer-go/pacer/internal/infer"
	"github.com/pacer-go/pacer/internal/quota"
	"github.com/pacer-go/pacer/internal/response"
	"github.com/pacer-go/pacer/store"
)

// The adaptive limiter's mechanics, in the order a request meets them:
// admission (Acquire, the wait for a request's slot, budget and token, every
// bound on that wait, and the charge), then settle (learn what the response
// said, retune, and the decision that sets the buckets). Both halves are one
// state machine under one mutex, sharing its lock discipline (unlock runs
// what was queued under it), so they are one file: DESIGN.md's path enters
// a file once, and settle would otherwise climb back into admission's.

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
		a.inflightCost.Add(thousandths(cost))
		a.admittedCost.Add(thousandths(cost))
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
	m := thousandths(cost)
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

// lanes is what a limiter knows of the classes of work that reach it: when
// interactive work last came, and whether any ever did.
type lanes struct {
	reserve BatchReserve
	// interactive is when interactive work last asked to be admitted
	// (package clock); never, before any did. Written on the interactive
	// admissions that move it by more than interactiveGrain, read by batch
	// ones.
	interactive atomic.Int64
}

// never marks lanes.interactive before any interactive work came. (The
// package clock is negative in a testing/synctest bubble: 0 is a time.)
const never = math.MinInt64

// interactiveGrain is how finely the last interactive admission is
// recorded: a thousandth of a second against an idle span of a minute, so
// that unmarked traffic at any rate costs a load, not a store, per request.
const interactiveGrain = int64(time.Millisecond)

// note records work of class c asking to be admitted at now (package
// clock).
func (l *lanes) note(c Class, now int64) {
	if c != Interactive {
		return
	}
	if last := l.interactive.Load(); last == never || now-last > interactiveGrain {
		l.interactive.Store(now)
	}
}

// take records the interactive work other saw, when it came later than
// any this one saw.
func (l *lanes) take(other *lanes) {
	at := other.interactive.Load()
	if at == never {
		return
	}
	for {
		last := l.interactive.Load()
		if last != never && last >= at || l.interactive.CompareAndSwap(last, at) {
			return
		}
	}
}

// since is how long before now (package clock) interactive work last asked
// to be admitted; negative when it never did.
func (l *lanes) since(now int64) time.Duration {
	last := l.interactive.Load()
	if last == never {
		return -1
	}
	return time.Duration(max(now-last, 0))
}

// share is the part of each quota's limit a request of class c must leave,
// at now (package clock), and until when that holds (0: indefinitely).
func (l *lanes) share(c Class, now int64) (share float64, until int64) {
	if c != Batch {
		return 0, 0
	}
	if last := l.interactive.Load(); last != never {
		if idleAt := last + int64(l.reserve.Idle); now < idleAt {
			return l.reserve.Share, idleAt
		}
	}
	return l.reserve.Floor, 0
}

// later queues f to run once mu is released; called with mu held.
func (a *Adaptive) later(f func()) { a.outbox = append(a.outbox, f) }

// unlock releases mu, then runs what was queued under it (later).
func (a *Adaptive) unlock() {
	out := a.outbox
	a.outbox = nil
	a.mu.Unlock()
	for _, f := range out {
		f()
	}
}

// Admission's side of the budgets: what a request takes of each known quota
// (charge), when a spent one could take it (spentUntil), and the two under
// one lock when nothing makes the request wait (admitAtOnce).

// heldSlots is the in-flight count a caller holding a slow-start or look
// slot (held) accounts for itself.
func heldSlots(held bool) int64 {
	if held {
		return 1
	}
	return 0
}

// charge takes one request (and cost tokens) from every budgeted quota and
// returns the admission's place in order (countAdmission). On failure seq
// is 0, nothing stays charged and retryAt is when the exhausted quota's
// window resets.
//
// The charge and the request's entry in the in-flight count (held reports
// it) happen together under mu, where learn settles responses and sets the
// budgets: a response is then applied either before the charge (and the
// budget it sets is charged after) or after it (and counts the request as
// unseen). Lock-free, a response applied in between would set the budget
// from a figure that does not count the request, and the charge was lost.
//
// now is the admission's reading of the package clock (clockNow).
func (a *Adaptive) charge(cost float64, class Class, now int64, held *bool) (seq int64, retryAt time.Time) {
	if !a.snap.Load().charged {
		return a.countAdmission(cost, class), time.Time{}
	}
	a.mu.Lock()
	defer a.unlock()
	return a.chargeLocked(cost, class, now, timeOf(now), held)
}

// chargeLocked is charge with mu held, for a limiter whose quotas are
// known (snap.charged).
func (a *Adaptive) chargeLocked(cost float64, class Class, now int64, at time.Time, held *bool) (seq int64, retryAt time.Time) {
	share, idleAt := a.lanes.share(class, now)
	flight := units(a.inflightCost.Load())
	if short, ok := a.book.Charge(cost, at, share, flight); !ok {
		// The window may have rolled over since the last look, refilling
		// the budget: retune finds out. retryAt is zero to retry at once.
		t := time.Now()
		a.retune(t)
		nothingOut := a.inflight.Load() == heldSlots(*held)
		retryAt, reserved := a.book.Refused(short, cost, t, share, flight, nothingOut)
		if reserved && idleAt != 0 {
			// Held back only by the reserve another class of work keeps:
			// until the quota refills, or that work goes idle (R65).
			retryAt = earlierTime(retryAt, clockTime(idleAt, t, clockOf(t)))
		}
		return 0, retryAt
	}
	if !*held {
		a.inflight.Add(1)
		*held = true
	}
	return a.countAdmission(cost, class), time.Time{}
}

// admitAtOnce admits a request to a limiter whose quotas are known and
// that has neither a Store nor a token quota counted (the common case of a
// server that states its quotas) in one section under mu: the budgets'
// look (spentUntil), the request bucket's token if it is there at now (ns,
// package clock; now as for spentUntil), and the charge. Taken one by one,
// as the general path takes them, they took the lock twice. tried reports
// that it went as far as the charge, whose answers seq (the admission's
// place in order; 0 when refused) and retryAt are;
// otherwise spent is spentUntil's, and the caller goes the general way (to
// wait for a spent budget, or in the bucket's queue), which looks again.
func (a *Adaptive) admitAtOnce(cost float64, class Class, ns int64, now time.Time, held *bool) (spent time.Time, tried bool, seq int64, retryAt time.Time) {
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

// fleetNeeds is what a request of this cost takes of each quota the
// fleet's budgets are kept for: the quotas this limiter knows.
func (a *Adaptive) fleetNeeds(cost float64, class Class) []need {
	a.mu.Lock()
	defer a.unlock()
	qs := a.book.Needs(nil, cost)
	if len(qs) == 0 {
		return nil
	}
	needs := make([]need, 0, len(qs))
	for _, q := range qs {
		n := need{quota: q.Quota, amount: q.Amount}
		if class == Batch && !q.Looking {
			r := a.lanes.reserve
			n.reserve = &store.Reserve{Active: r.Share * q.Limit, Floor: r.Floor * q.Limit, Idle: r.Idle}
		}
		needs = append(needs, n)
	}
	return needs
}

// spentUntil is when the budgets could take a request of this cost: the
// reset of a quota that is spent now, else the zero time.
func (a *Adaptive) spentUntil(cost float64, class Class, ns int64, now time.Time) time.Time {
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
// are known (snap.charged). now is the instant ns, or the zero time for
// interactive work (whose share is 0: only a reserve's wait is a time).
func (a *Adaptive) spentUntilLocked(cost float64, class Class, ns int64, now time.Time) time.Time {
	share, idleAt := a.lanes.share(class, ns)
	at := a.book.SpentUntil(cost, share, now)
	if idleAt != 0 && !at.IsZero() {
		at = earlierTime(at, clockTime(idleAt, now, ns))
	}
	return at
}

// refund gives a request's charge back to every quota; called with a.mu
// held.
func (a *Adaptive) refund(cost float64) { a.book.Refund(cost) }

// Settle: what a response said, applied (learn), and the retune that
// follows from it.

// doneWith is Done for a response read as m, which arrived at now (the
// Transport's one reading of the clock and of the response); nil for none.
// The limiter copies what it keeps of m. (m goes by pointer, down to the
// limiter's learn: copying it at each call was 4% of a response's CPU time
// through the Transport.)
func (p *Permit) doneWith(m *response.Meaning, now time.Time) {
	if !p.live {
		return
	}
	p.live = false
	untold := false
	if p.a.fleet != nil { // (a call fewer, and a file, on a request's path without a fleet)
		untold = p.a.fleet.answered(p.fleet, m, now)
	}
	p.a.learn(m, p.seq, p.cost, now)
	if untold {
		p.a.tellInteractive(now)
	}
}

// learnOther applies what a response meant, as Permit.Done does, for a
// request this limiter did not admit (it went through another limiter that
// shares the server's bucket): it retunes, pauses and counts a throttle,
// and ends slow start if m.Status ≠ 0, but does not touch the in-flight
// count.
func (a *Adaptive) learnOther(m *response.Meaning) {
	a.learn(m, 0, 0, time.Time{})
}

// learnLate applies what a response said after it was settled, for a
// request this limiter admitted: a refusal its stream's first event states,
// read as the caller reads the body (response.Watch). It is learnt as
// another limiter's response is (learnOther), less what that counts again:
// the request was answered and counted as admitted when its 200 came, and
// the refusal takes back that admission (a 429 is not counted, and a 529
// was counted once already). Squared here, not told to learnLocked, whose
// every response paid a few dozen instructions for a parameter saying so.
func (a *Adaptive) learnLate(m *response.Meaning) {
	now := time.Now()
	a.mu.Lock()
	a.learnLocked(m, 0, 0, now)
	a.requests--
	a.admitted.Add(-1)
	if c := a.avgCost.Load(); c > 0 {
		a.admittedCost.Add(-min(c, a.admittedCost.Load()))
	}
	a.appliedLocked(false)
	a.unlock()
}

// maxFeeders bounds the limiters feed remembers: a bucket is fed by the
// host limiters and patterns whose routes the server put in it, a handful.
const maxFeeders = 8

// feed records that from admits requests the server may count against this
// limiter's quotas (the host's limiter sends a route's first requests before
// a response names the route's bucket). Their in-flight count is then unseen
// here too: without it, what the server counted of them reads as another
// client's spending, or worse, a budget that does not leave room for them.
func (a *Adaptive) feed(from *Adaptive) {
	if from == nil || from == a {
		return
	}
	for {
		old := a.feeders.Load()
		var list []*Adaptive
		if old != nil {
			if slices.Contains(*old, from) || len(*old) >= maxFeeders {
				return
			}
			list = slices.Clone(*old)
		}
		list = append(list, from)
		if a.feeders.CompareAndSwap(old, &list) {
			return
		}
	}
}

// fed is how many requests the feeding limiters have in flight.
func (a *Adaptive) fed() int64 {
	f := a.feeders.Load()
	if f == nil {
		return 0
	}
	var n int64
	for _, b := range *f {
		n += max(b.inflight.Load(), 0)
	}
	return n
}

// settle takes a settled permit's request out of the in-flight count and
// returns how many admitted requests are still out besides it. cost is the
// request's stated cost, 0 for a blind one.
func (a *Adaptive) settle(cost float64) int64 {
	others := a.inflight.Add(-1)
	if others < 0 {
		// More settled than admitted: only a Permit copied before it was
		// settled (which its doc forbids) gets here. Not ours to count.
		a.inflight.Add(1)
		others = 0
	}
	if cost > 0 {
		if a.hinted.Load() > 0 {
			a.hinted.Add(-1)
		}
		if c := a.inflightCost.Load(); c > 0 {
			a.inflightCost.Add(-min(thousandths(cost), c))
		}
	}
	return others
}

// learn is Permit.Done's and learnOther's common part: m is what the
// response meant, nil when none was obtained; seq is the request's place in
// the order of this limiter's admissions (a permit's, of the given cost,
// which leaves the in-flight count), 0 for one another limiter admitted. now is when the response arrived (the time
// its headers were read at), or the zero time to read the clock.
//
// It leaves it under mu, not before: every admitted request is then either
// counted as unseen or already applied. Taken out earlier, responses queued
// on mu behind the one being applied would be neither, and the server's
// figure (which counted them) would read as that many units spent by
// others: a drift baseline off by up to the whole in-flight count.
func (a *Adaptive) learn(m *response.Meaning, seq int64, cost float64, now time.Time) {
	if m != nil && m.Status != 0 && now.IsZero() {
		now = time.Now()
	}
	own := seq > 0
	a.mu.Lock()
	a.learnLocked(m, seq, cost, now)
	// Once the response is applied, the callers waiting for a change look
	// again, and for a request of ours, which freed its slot, a caller
	// held at the gate. (Called here, not deferred from learnLocked, with
	// its many returns: the two deferred calls were 3% of a GitHub-style
	// response's instructions.)
	a.appliedLocked(own)
	a.unlock()
}

// learnLocked is learn's body, with mu held.
func (a *Adaptive) learnLocked(m *response.Meaning, seq int64, cost float64, now time.Time) {
	own := seq > 0
	a.applied.Add(1)
	if m == nil || m.Status == 0 {
		if own {
			a.settle(cost)
		}
		return
	}
	fed := a.fed()
	var others int64 // in flight besides this response's request
	if own {
		others = a.settle(cost) + fed
	} else {
		// The response's own request is one of the feeders' in flight
		// (a feeder settles its permit after teaching this limiter), not
		// another request the server may not have counted: counted as
		// one, it was noise in the books, and hid the few units an unseen
		// client spent during our first burst.
		fed = max(fed-1, 0)
		others = a.inflight.Load() + fed
		// Another limiter admitted it, but the server charged it to this
		// quota: for the drift it is this limiter's spending, not someone
		// else's (the host's limiter sends a route's first requests before
		// a response names the route's bucket).
		a.admitted.Add(1)
		a.admittedCost.Add(a.avgCost.Load())
	}
	wasStarted := a.started.Load()
	if !wasStarted {
		a.started.Store(true)
	}
	a.requests++
	a.trackRTT(now, others)
	status, sig, nq := m.Status, m.Body, m.Quotas.Len()
	if nq > 0 || m.RetryAfter > 0 || m.Bucket != "" {
		// Kept as the grammar read them: the readers (Stats, a
		// *RateLimitError) convert them.
		a.lastInfo, a.lastQuotas = m.Info, m.Quotas
	}

	if !m.Counted() {
		// The server did not count this request: neither do the drifts'
		// baselines (it would read as a refill otherwise).
		a.admitted.Add(-1)
		switch c := a.avgCost.Load(); {
		case own && cost > 0:
			a.hintedAdmits.Add(-1)
			a.admittedCost.Add(-min(thousandths(cost), a.admittedCost.Load()))
		case own && cost == 0:
			// Blind: counted by admitted alone.
		case c > 0 && a.admittedCost.Load() >= c:
			// Another limiter's, of a cost unknown here: the average.
			a.admittedCost.Add(-c)
		}
	}
	a.reports = a.reports[:0]
	derived := derivedQuota(&m.Quotas)
	for i := range nq {
		q := m.Quotas.At(i)
		if derived != "" && q.Name == derived {
			continue
		}
		// Field by field into its place, every field (a report built
		// apart and copied in was read whole right after it was written
		// word by word: a store-forwarding stall; a slot cleared first
		// was cleared for nothing).
		if n := len(a.reports); n < cap(a.reports) {
			a.reports = a.reports[:n+1]
		} else {
			a.reports = append(a.reports, quota.Named{})
		}
		r := &a.reports[len(a.reports)-1]
		r.Name, r.Tokens = q.Name, q.Unit == header.Tokens
		r.Limit, r.Remaining, r.Reset, r.Window = q.Limit, q.Remaining, q.Reset, q.Window
	}
	if len(a.stated) > 0 {
		a.reportStated(now, nq > 0, m.Counted())
	}
	var handoff float64 // the model gave up: the probe starts at this rate
	var handoffSpan time.Duration
	switch {
	case a.infer == nil:
	case nq > 0:
		a.stopInferring()
	case sig == response.None:
		r, ok := a.infer.Observe(now, status, m.RetryAfter)
		if a.infer.Off() {
			handoff, handoffSpan = a.infer.Capacity(now)
			a.stopInferring()
		} else if ok {
			a.reports = append(a.reports, quota.Named{Name: infer.Name, Report: r})
		}
	}
	var exhausted bool
	if len(a.reports) > 0 || a.book.Len() > 0 {
		// (Else nothing to tell the model, which holds nothing: every
		// answer of a server that states no quota.)
		seen := quota.Seen{
			Horizon: a.horizon(), Age: a.rtt(),
			Seq: seq, Admissions: a.admissions.Load(),
			Refused: status == http.StatusTooManyRequests,
		}
		if a.feeders.Load() != nil {
			// With feeding limiters, requests charged elsewhere land in
			// this quota at any time: less left than the budget proves
			// nothing.
			seen.Fed = math.Inf(1)
		} else {
			seen.Fed = float64(fed)
		}
		exhausted = a.book.Observe(a.reports, now, a.counts(float64(others)), seen)
	}

	if m.RetryAfter > 0 && status >= 400 { // negative: ignored
		a.pauseLocked(now.Add(min(m.RetryAfter, a.cfg.MaxDelay)))
	}
	if sig == response.Gone || sig == response.TooLarge {
		// The quota is gone for good (billing), or the request is larger
		// than the whole limit: waiting cannot help and nothing here
		// should slow down for it. The caller gets the response at once.
		a.retune(now)
		return
	}
	engaged := a.probe.Engaged() // Meter may let go of a probe that measured nothing
	a.probe.Meter(now, status < 400)
	if status >= 400 {
		// The wait a refusal states measures what the server frees,
		// whoever paces it now (the inferred window may give up later).
		a.probe.Refused(now, m.RetryAfter)
	}
	if sig == response.BodyLimit {
		a.bodyLimitLocked(now, m.RetryAfter, exhausted, others)
	}
	if m.Throttled && sig != response.BodyLimit {
		a.throttled++
		// Quota headers explain a throttle when a quota is spent or the server
		// named a wait; otherwise (no headers, or a limit the headers do not
		// show) the probing fallback cuts the rate.
		switch {
		case m.Overloaded() && !exhausted && (len(a.reports) > 0 || a.quotasKnown()):
			// Overload, not quota: the server shed a request while its
			// quota headers (now or before) show room, and no quota the
			// model holds (stated by WithQuota, or inferred) is spent. The Transport retries
			// it under a retry budget; cutting the rate below what the
			// quota allows would make 5% shed requests cost 90% of the quota.
		case len(a.reports) == 0 || !exhausted:
			// No stated quota explains it (a Retry-After while every
			// quota shows room is a limit the headers do not show):
			// pausing alone would trip it again at once on resuming.
			// The server's bucket is empty: empty ours too, and hold new
			// requests until the probe's next look (one at a time, see
			// the gate below, until the server accepts again).
			if hold := a.probe.Throttle(now, others, a.rtt()); !hold.IsZero() {
				a.pauseLocked(hold)
			}
			a.probe.Adopt(handoff, handoffSpan, now)
		}
		if l := a.cfg.Logger; l != nil {
			key, retryAfter := a.cfg.Key, m.RetryAfter
			a.later(func() {
				l.LogAttrs(context.Background(), slog.LevelWarn, "pacer: throttled",
					slog.String("endpoint", key), slog.Int("status", status),
					slog.Duration("retry_after", retryAfter))
			})
		}
	}
	if wasStarted && status < http.StatusBadRequest && sig == response.None && a.book.Len() == 0 && !engaged && !a.probe.Engaged() && m.RetryAfter == 0 {
		// Nothing a decision reads changed: no quota, no probe (before
		// this answer or since), slow start over, a plain success (the
		// common case of a server that states nothing). retune would
		// decide what it decided last time.
		return
	}
	a.retune(now)
}

// appliedLocked announces a response applied (learn). Called with the lock
// held.
func (a *Adaptive) appliedLocked(own bool) {
	a.changedLocked()
	if own {
		a.wakeGateLocked()
	}
}

// stopInferring hands the endpoint over to the quotas its server now
// states. Called with a.mu held.
func (a *Adaptive) stopInferring() {
	a.infer = nil
	a.book.DropInferred()
}

// state starts the quotas stated for the endpoint (AdaptiveConfig.Quotas,
// validated, each name once) at now, as a server's statement of them would: their budgets
// are known from the start, so slow start is over before it began.
func (a *Adaptive) state(qs []Quota, now time.Time) {
	a.mu.Lock()
	a.stated = a.stated[:0]
	for _, q := range qs {
		a.stated = append(a.stated, statedQuota{name: q.Name, Stated: quota.Stated{Limit: q.Limit, Window: q.Window}})
	}
	a.reports = a.reports[:0]
	for i := range a.stated {
		s := &a.stated[i]
		a.reports = append(a.reports, quota.Named{Name: s.name, Report: s.Start(now)})
	}
	a.book.Observe(a.reports, now, quota.Counts{}, quota.Seen{Horizon: a.horizon(), Age: a.rtt()})
	a.started.Store(true)
	a.retune(now)
	a.changedLocked()
	a.unlock()
}

// reportStated adds to a.reports what the stated quotas say after a
// response that arrived at now (counted: one the server counted), or
// drops them for good when the server states quotas of its own. Called
// with a.mu held.
func (a *Adaptive) reportStated(now time.Time, serverStates, counted bool) {
	if serverStates {
		stated := a.stated
		a.book.Drop(func(name string) bool {
			return slices.ContainsFunc(stated, func(s statedQuota) bool { return s.name == name })
		})
		a.stated = nil
		return
	}
	for i := range a.stated {
		s := &a.stated[i]
		a.reports = append(a.reports, quota.Named{Name: s.name, Report: s.Answered(now, counted)})
	}
}

// quotasKnown reports whether the server has described a quota of this
// endpoint; called with a.mu held.
func (a *Adaptive) quotasKnown() bool { return a.book.Known() }

// units converts milli-units to units. A count of 0 (each cost count of a
// client that states no costs) is 0 without a division: a response
// converts six, and their divisions were 1% of a GitHub-style response's
// CPU time through the Transport.
func units(m int64) float64 {
	if m == 0 {
		return 0
	}
	return float64(m) / thousand
}

// countsInto sets c to what the quota model needs of the in-flight and
// admission counts, with unseen requests in flight; called with a.mu held.
// Field by field, and the model takes c by pointer (see response.Read for
// why not whole values).
func (a *Adaptive) counts(unseen float64) quota.Counts {
	return quota.Counts{
		Inflight: unseen, InflightCost: units(a.inflightCost.Load()),
		Admitted: float64(a.admitted.Load()), AdmittedCost: units(a.admittedCost.Load()),
		Blind:         float64(max(a.admitted.Load()-a.hintedAdmits.Load(), 0)),
		BlindInflight: float64(max(a.inflight.Load()-a.hinted.Load(), 0)),
	}
}

// derivedQuota names the quota of quotas that only restates others, "" when
// none does: Anthropic's tokens-* fields state "the most restrictive token
// limit currently in effect", the input-tokens or the output-tokens one, so
// beside both they flip between two buckets whose costs per request differ
// sixfold, and a model of them learns neither.
func derivedQuota(qs *header.Quotas) string {
	var in, out, all bool
	for i := range qs.Len() { // by pointer: a Quota copied to read its name stalled (see response.Read)
		switch qs.At(i).Name {
		case "input-tokens":
			in = true
		case "output-tokens":
			out = true
		case "tokens":
			all = true
		}
	}
	if in && out && all {
		return "tokens"
	}
	return ""
}

// trackRTT keeps smoothed figures for Little's law: the round trip is about
// the mean in-flight count times the mean interval between responses.
func (a *Adaptive) trackRTT(now time.Time, others int64) {
	if !a.lastObs.IsZero() {
		a.interval = 0.9*a.interval + 0.1*now.Sub(a.lastObs).Seconds()
	}
	a.avgFlight = 0.9*a.avgFlight + 0.1*float64(others+1)
	a.lastObs = now
}

// rtt is the estimated round trip.
func (a *Adaptive) rtt() time.Duration {
	return time.Duration(a.avgFlight * a.interval * float64(time.Second))
}

// horizon is how long a budget stands before a higher Remaining in the same
// window is believed: a response can be overtaken by later ones by about a
// round trip.
func (a *Adaptive) horizon() time.Duration {
	return min(max(2*a.rtt(), 20*time.Millisecond), 2*time.Second)
}

func (a *Adaptive) pauseLocked(t time.Time) {
	if t.After(a.paused) {
		a.paused = t
		a.req.PauseUntil(t)
		if a.share != nil {
			a.later(func() { a.share.paused(t) })
		}
	}
}

// retune rolls windows whose reset passed, derives the request and token
// rates and bursts from every source (quotas, probe, ceiling) and applies
// them to the buckets. Called with a.mu held.
func (a *Adaptive) retune(now time.Time) {
	p := a.book.Advance(now, a.counts(float64(a.inflight.Load())), max(units(a.avgCost.Load()), 1))
	next := int64(math.MaxInt64)
	if !p.Next.IsZero() {
		next = clockOf(p.Next)
	}
	if old := a.snap.Load(); old.checkAt != next || old.charged != (p.Known > 0) || old.tokens != p.Tokens {
		a.snap.Store(&admission{charged: p.Known > 0, tokens: p.Tokens, checkAt: next})
	}
	if p.Rolled {
		a.changedLocked()
	}
	// Field by field, not a literal: the literal was built apart and
	// copied whole (see response.Read for why that costs).
	var in decisionInput
	in.Started, in.Quotas, in.Blind = a.started.Load(), p.Known, p.Blind
	in.ReqRate, in.ReqBudget, in.TokRate, in.TokBudget = p.Req.Rate, p.Req.Budget, p.Tok.Rate, p.Tok.Budget
	in.ReqAtOnce, in.TokAtOnce = p.Req.AtOnce, p.Tok.AtOnce
	in.ReqSpare, in.TokSpare = p.Req.Spare, p.Tok.Spare
	in.ProbeRate, in.ProbeEngaged, in.ProbeClosed = a.probe.Grow(now), a.probe.Engaged(), a.probe.Closed()
	in.InferTrial, in.TrialGate = a.infer != nil && a.infer.Trial(), infer.TrialInFlight
	in.Ceiling, in.CeilingBurst = float64(a.cfg.Ceiling), float64(a.cfg.CeilingBurst)
	in.MaxCost = units(a.maxCost.Load())
	in.Safety = a.safety
	in.canonicalize()
	if a.decided && in == a.lastDecision && a.share == nil {
		// Decided and applied last time, and the buckets and the gate change
		// nowhere else (with a Store, apply also publishes what it set).
		return
	}
	a.decided, a.lastDecision = true, in
	d := makeDecision(in)
	a.mode = d.Mode
	a.apply(a.req, d.ReqLimit, d.ReqBurst, 1, min(float64(d.ReqBurst), in.ReqAtOnce), "requests", d.Reason)
	a.apply(a.tok, d.TokLimit, d.TokBurst, d.TokNeed, min(float64(d.TokBurst), in.TokAtOnce), "tokens", "quota")
	if !d.KeepGate {
		a.setGateLocked(d.Gate)
	}
}

// apply sets a bucket's limit and burst, when they changed enough to matter:
// every change makes the bucket re-plan its waiters, and a stream of
// responses nudges the rate by fractions of a percent. A limit 1% lower, or
// 2% higher, applies; smaller drifts wait for the next response (the budgets,
// not the rate, are what keep a window from being overspent).
func (a *Adaptive) apply(b *Bucket, rate float64, burst, need int, fill float64, what, reason string) {
	limit := Inf
	if !math.IsInf(rate, 1) {
		limit = Limit(rate)
	}
	old := b.Limit()
	setLimit, setBurst := keepLimit, keepBurst
	if (old != Inf) != (limit != Inf) || float64(limit) < float64(old)*0.99 || float64(limit) > float64(old)*1.02 {
		setLimit = limit
		if l := a.cfg.Logger; l != nil && significant(old, limit) {
			key, mode := a.cfg.Key, a.mode
			a.later(func() {
				l.LogAttrs(context.Background(), slog.LevelDebug, "pacer: retuned",
					slog.String("endpoint", key), slog.String("quota", what),
					slog.Float64("old", float64(old)), slog.Float64("new", float64(limit)),
					slog.String("mode", mode.String()), slog.String("reason", reason))
			})
		}
	}
	// A burst below need (the largest cost seen) would refuse a request.
	if old := b.Burst(); old != burst && (old < need || old < 10 || burst < old*9/10 || burst > old*11/10) {
		setBurst = burst
	}
	if fill > 0 {
		// What the quota says may go at once is in the bucket, whatever
		// the pace before left there, with the limit and burst set
		// together: set apart, the level carries over capped at the old
		// burst, and a quota read as a bucket after its first answers
		// (once its time to full is seen moving) kept the one token its
		// pace had left, a job it afforded paced at 0.9 × what was left
		// over the time to full (69× unpaced on 5,000 an hour).
		b.setFillAt(useClock, setLimit, setBurst, fill)
	} else {
		if setLimit != keepLimit {
			b.SetLimit(setLimit)
		}
		if setBurst != keepBurst {
			b.SetBurst(setBurst)
		}
	}
	if b == a.req && a.share != nil && !a.budgetPacedLocked() {
		if limit, burst := b.Limit(), b.Burst(); a.share.learnedLocked(limit, burst) {
			a.later(func() { a.share.publish(limit, burst) })
		}
	}
}

// significant reports a change worth a log record: 10% or more, or to or
// from Inf.
func significant(old, new Limit) bool {
	if (old == Inf) != (new == Inf) {
		return true
	}
	return math.Abs(float64(new-old)) >= 0.1*float64(old)
}

// nextAllowed is the earliest time a new request could start if Acquire
// were called now: now when there is no wait. The transport's retry
// decisions use it. It reads the state as the last response or retune left
// it and changes nothing (a window whose reset has passed shows as free).
func (a *Adaptive) nextAllowed() time.Time {
	now := time.Now()
	at := a.req.nextAt(1)
	a.mu.Lock()
	at = laterTime(at, a.heldUntilLocked())
	a.unlock()
	return laterTime(now, at)
}

// heldUntilLocked is when the pause and the spent request quotas let a
// request go; called with a.mu held.
func (a *Adaptive) heldUntilLocked() time.Time {
	return laterTime(a.paused, a.book.HeldUntil())
}

// bodyLimitLocked applies a limit a response stated only in its body
// (GitHub's secondary rate limits) as GitHub documents it: wait for its
// Retry-After if it sent one; else, if a quota is spent, for its reset
// (the budget holds that); else at least bodyLimitWait, doubling for each
// such limit within bodyLimitMemory of the last, up to bodyLimitMaxWait
// (and MaxDelay). The endpoint also slows down (the probing fallback cuts
// its rate) so that it does not trip again as it resumes. Called with
// a.mu held.
func (a *Adaptive) bodyLimitLocked(now time.Time, retryAfter time.Duration, exhausted bool, others int64) {
	if !a.lastBodyLimit.IsZero() && now.Sub(a.lastBodyLimit) > bodyLimitMemory {
		a.bodyStrikes = 0
	}
	a.lastBodyLimit = now
	// Answers to requests that were in flight when the first of a trip
	// arrived belong to that trip: counted as trips of their own, one burst
	// of 20 such answers doubled the wait to its 15-minute cap and kept
	// 0.19 of what the limit allows (bench/SITUATIONS.md).
	sameTrip := now.Before(a.bodyLimitUntil)
	wait := retryAfter
	if wait <= 0 && !exhausted && !sameTrip {
		wait = min(bodyLimitWait<<min(a.bodyStrikes, 10), bodyLimitMaxWait)
		a.bodyStrikes++
	}
	until := now
	if wait > 0 {
		until = now.Add(min(wait, a.cfg.MaxDelay))
		a.pauseLocked(until)
		a.bodyLimitUntil = laterTime(a.bodyLimitUntil, until)
	}
	a.throttled++
	// Resume below what the server admitted before it objected, climb back
	// over bodyLimitCycle to the safety factor's share of it, never beyond
	// while the trip is remembered: a second trip within 20 minutes was
	// the rule, not the exception, with the cubic left to climb, and at
	// the whole of it (issue 24).
	a.probe.Punished(now, until, others, a.rtt(), a.safety, bodyLimitCycle, bodyLimitMemory)
}

const (
	// bodyLimitWait is the least wait after a body-stated limit with no
	// Retry-After: GitHub's documentation says to wait at least a minute
	// before retrying after a secondary rate limit.
	bodyLimitWait = time.Minute
	// bodyLimitMaxWait caps the doubling that follows repeated ones (15
	// minutes: four doublings), so a wait stays bounded however often the
	// server keeps refusing; MaxDelay bounds it too.
	bodyLimitMaxWait = 15 * time.Minute
	// bodyLimitMemory is how long a body-stated limit counts towards the
	// doubling: one an hour apart is a fresh start.
	bodyLimitMemory = time.Hour
	// bodyLimitCycle is how long the rate takes to climb back to what the
	// server admitted before a body-stated limit: 5 minutes. Each trip
	// costs a pause of a minute or more (GitHub's rule), so probing for the
	// limit slowly costs less than finding it again.
	bodyLimitCycle = 5 * time.Minute
)

// thousand is the scale of the limiter's atomic counts of stated costs:
// thousandths of a token, so that admissions and settles cancel exactly.
const thousand = 1000

// thousandths is v in thousandths, rounded up; 0 for v ≤ 0 or NaN, and
// bounded far below overflow.
func thousandths(v float64) int64 {
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxInt64/(2*thousand):
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(v * thousand))
}

// timeOf is the instant ns on the package clock.
func timeOf(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }
