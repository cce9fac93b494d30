package pacer

import (
	"time"

	"github.com/pacer-go/pacer/internal/quota"
	"github.com/pacer-go/pacer/store"
)

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
	return a.chargeLocked(cost, class, now, held)
}

// chargeLocked is charge with mu held, for a limiter whose quotas are
// known (snap.charged).
func (a *Adaptive) chargeLocked(cost float64, class Class, now int64, held *bool) (seq int64, retryAt time.Time) {
	share, idleAt := a.lanes.share(class, now)
	flight := a.inflightCost.Load()
	if w := a.book.Charge(cost, now, share, flight); w != nil {
		// The window may have rolled over since the last look, refilling
		// the budget; retune finds out and otherwise pauses until reset.
		// retryAt is zero to retry at once, or now when a probe is out
		// and only its response can tell.
		amount := w.Amount(cost)
		t := time.Now()
		a.retune(t)
		switch ns := clockOf(t); {
		case w.Budget() < amount+w.Debt(ns):
			retryAt = t
			switch {
			case w.Probing() && a.inflight.Load() == heldSlots(*held):
				// The look was taken but nothing is out: its answer
				// will not come (a request abandoned, failed, or
				// answered about another window). Look again.
				w.StartProbe(float64(amount) / quota.Milli)
				retryAt = time.Time{}
			case !w.Probing():
				retryAt = laterTime(t, w.WakeAt())
			}
		case w.Reserved(amount, ns, share):
			// Held back only by the reserve another class of work keeps:
			// until the quota refills, or that work goes idle.
			retryAt = w.RefillAt(t)
			if idleAt != 0 {
				retryAt = earlierTime(retryAt, clockTime(idleAt, t, ns))
			}
		case w.Unconfirmed(cost, flight) > 0:
			// Held back for the stated costs in flight, which may yet
			// fall short: until their answers say what they took.
			retryAt = t
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
	if spent = a.spentUntilLocked(cost, class, ns, now); !spent.IsZero() || !a.req.take(1, ns) {
		return spent, false, 0, time.Time{}
	}
	seq, retryAt = a.chargeLocked(cost, class, ns, held)
	return time.Time{}, true, seq, retryAt
}

// fleetNeeds is what a request of this cost takes of each quota the
// fleet's budgets are kept for: the quotas this limiter knows.
func (a *Adaptive) fleetNeeds(cost float64, class Class) []need {
	a.mu.Lock()
	defer a.unlock()
	ws := a.book.Charged()
	if len(ws) == 0 {
		return nil
	}
	needs := make([]need, 0, len(ws))
	for _, w := range ws {
		if amount := float64(w.Amount(cost)) / quota.Milli; amount > 0 {
			n := need{quota: w.Name(), amount: amount}
			if class == Batch && !w.Probing() && !w.Rolled() {
				r := a.lanes.reserve
				n.reserve = &store.Reserve{Active: r.Share * w.Limit(), Floor: r.Floor * w.Limit(), Idle: r.Idle}
			}
			needs = append(needs, n)
		}
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
	return a.spentUntilLocked(cost, class, ns, now)
}

// spentUntilLocked is spentUntil with mu held, for a limiter whose quotas
// are known (snap.charged). now is the instant ns, or the zero time for
// interactive work (whose share is 0: only a reserve's wait is a time).
func (a *Adaptive) spentUntilLocked(cost float64, class Class, ns int64, now time.Time) time.Time {
	share, idleAt := a.lanes.share(class, ns)
	at := a.book.SpentUntil(cost, share, ns, now)
	if idleAt != 0 && !at.IsZero() {
		at = earlierTime(at, clockTime(idleAt, now, ns))
	}
	return at
}

// refund gives a request's charge back to every quota; called with a.mu
// held.
func (a *Adaptive) refund(cost float64) { a.book.Refund(cost) }
