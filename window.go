package pacer

import (
	"math"
	"strings"
	"sync/atomic"
	"time"
)

// quotaWindow follows one server quota (a Quota name) across responses: what
// is left of it for new requests in the current window, when that window
// ends, and how long windows are.
//
// The budget is the heart of the zero-429 promise. It is a lower bound on what
// new requests may still spend before the window resets: the remaining figure
// of a response minus everything admitted but not yet observed (which that
// response may not have counted), then decremented by Wait for every request
// it admits. A response lowers it at once; one that would raise it within the
// same window is believed only once the budget has stood for a while, because
// concurrent requests return out of order and a stale response reports a
// Remaining that later requests have already spent.
type quotaWindow struct {
	name   string
	tokens bool // token-denominated: charged a request's cost, not 1

	// budget is in milli-units; Wait charges it with atomic adds, so the
	// happy path takes no lock. Meaningful only while the quota is in the
	// Adaptive's charge list.
	budget atomic.Int64
	// most is the largest single charge the quota can ever take (its limit,
	// milli-units): a cost above it is charged as this much, or it would wait
	// for a window that never comes.
	most atomic.Int64

	// Guarded by Adaptive.mu.
	limit  float64       // quota per window as last stated; 0 unknown
	peak   float64       // highest Remaining seen: the limit's stand-in when unstated
	window time.Duration // policy window, else learned from the reset cadence; 0 unknown
	stated bool          // window came from a policy parameter (w=)
	reset  time.Time     // end of the current window as believed; zero unknown
	stamp  time.Time     // latest reset a response stated (not assumed): the cadence's last beat
	jitter time.Duration // how much stated resets of one window wander (rounding, latency)
	setAt  time.Time     // when a response last set the budget
	known  bool          // budget describes the current window
	rolled bool          // reset passed with no response from the new window yet
	// mentioned marks the windows the response being observed described.
	mentioned bool
}

// milli is the fixed-point scale of budgets and in-flight costs.
const milli = 1000

func toMilli(v float64) int64 {
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxInt64/(2*milli):
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(v * milli))
}

func isTokenQuota(name string) bool { return strings.Contains(strings.ToLower(name), "token") }

// tolerance is how far apart two stated resets may be and still name the
// same window. Servers round resets (to whole seconds, often) and relative
// resets drift with latency; both show as jitter between responses of one
// window. A known window caps it: resets a quarter window apart are different
// windows unless the jitter itself is that large.
func (w *quotaWindow) tolerance() time.Duration {
	tol := min(max(4*w.jitter, 10*time.Millisecond), time.Second)
	if w.window > 0 {
		tol = min(tol, max(w.window/4, 2*w.jitter))
	}
	return tol
}

// observe folds one response's view of the quota into the window. unseen is
// what was admitted and not yet observed besides this response's own request
// (requests, or estimated tokens for a token quota): the server may not have
// counted it. horizon is how old the budget must be before a higher
// Remaining in the same window is believed.
func (w *quotaWindow) observe(q Quota, now time.Time, unseen float64, horizon time.Duration) {
	if q.Limit > 0 {
		w.limit = q.Limit
	}
	w.peak = max(w.peak, q.Remaining)
	w.most.Store(max(toMilli(max(w.limit, w.peak)), milli))
	if q.Window > 0 {
		w.window, w.stated = q.Window, true
	}
	if q.Reset.IsZero() {
		// A policy without state (Remaining == Limit, no reset) or a level with
		// no time attached (Shopify): nothing says when the quota comes back,
		// so it cannot be spread or gated; the probing fallback covers it.
		return
	}
	if !q.Reset.After(now) {
		// The window it describes is over (parsers map past resets to now).
		return
	}
	eff := max(q.Remaining-unseen, 0)
	tol := w.tolerance()
	if w.known && !w.rolled {
		if d := q.Reset.Sub(w.stamp).Abs(); d <= tol {
			w.jitter = max(d, w.jitter*7/8)
		}
	}
	switch {
	case !w.known || w.rolled || q.Reset.Sub(w.stamp) >= tol:
		// A new window. Consecutive windows' resets teach the window length
		// when no policy states it.
		if d := q.Reset.Sub(w.stamp); !w.stated && !w.stamp.IsZero() && d > 2*w.jitter && (w.window == 0 || d < w.window) {
			w.window = d
		}
		w.reset, w.stamp = q.Reset, q.Reset
	case float64(w.budget.Load())/milli <= eff && now.Sub(w.setAt) < horizon:
		// Same window, higher Remaining than the budget: stale until proven
		// otherwise. Keep the later reset, which is the conservative one.
		w.reset, w.stamp = laterOf(w.reset, q.Reset), laterOf(w.stamp, q.Reset)
		return
	default:
		w.reset, w.stamp = laterOf(w.reset, q.Reset), laterOf(w.stamp, q.Reset)
	}
	w.known, w.rolled, w.setAt = true, false, now
	w.budget.Store(toMilli(eff))
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// roll moves a window whose reset has passed on to the next one. With a
// known limit and window the next window is assumed to hold the full limit,
// minus what is in flight (it may land there). Without them nothing is known
// about the new window: the budget is dropped and ok is false, and the caller
// lets a single request through to learn it.
func (w *quotaWindow) roll(now time.Time, inflight float64) (ok bool) {
	w.rolled = true
	limit := w.limit
	if limit == 0 {
		limit = w.peak
	}
	if w.window <= 0 || limit <= 0 {
		w.known = false
		w.reset = time.Time{}
		return false
	}
	if n := now.Sub(w.reset)/w.window + 1; n > 0 {
		w.reset = w.reset.Add(n * w.window)
	}
	w.setAt = now
	w.budget.Store(toMilli(limit - inflight))
	return true
}

// spendable is the budget left above the reserve, in units.
func (w *quotaWindow) spendable(reserve float64) float64 {
	return float64(w.budget.Load())/milli - reserve
}

// reserve is what a token quota keeps back: a request's cost is an estimate,
// so (1-safety) of the quota absorbs estimates that fall short until the
// server's next figure corrects them. Request quotas count exactly.
func (w *quotaWindow) reserve(safety float64) float64 {
	if !w.tokens {
		return 0
	}
	limit := w.limit
	if limit == 0 {
		limit = w.peak
	}
	return (1 - safety) * limit
}

// steadyRate is the rate that spends safety × limit per window; 0 unknown.
func (w *quotaWindow) steadyRate(safety float64) float64 {
	limit := w.limit
	if limit == 0 {
		limit = w.peak
	}
	if w.window <= 0 || limit <= 0 {
		return 0
	}
	return safety * limit / w.window.Seconds()
}
