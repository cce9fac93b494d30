package pacer

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/pacer-go/pacer/internal/decision"
	"github.com/pacer-go/pacer/internal/header"
	"github.com/pacer-go/pacer/internal/infer"
	"github.com/pacer-go/pacer/internal/quota"
	"github.com/pacer-go/pacer/internal/response"
)

// learnOther applies what a response meant, as Permit.Done does, for a
// request this limiter did not admit (it went through another limiter that
// shares the server's bucket): it retunes, pauses and counts a throttle,
// and ends slow start if m.Status ≠ 0, but does not touch the in-flight
// count.
func (a *Adaptive) learnOther(m *response.Meaning) {
	a.learn(m, 0, 0, time.Time{})
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
			a.inflightCost.Add(-min(quota.ToMilli(cost), c))
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
	a.requests++
	wasStarted := a.started.Load()
	if !wasStarted {
		a.started.Store(true)
	}
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
			a.admittedCost.Add(-min(quota.ToMilli(cost), a.admittedCost.Load()))
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
	case a.infer.Off():
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
		var c quota.Counts
		a.countsInto(&c, float64(others))
		exhausted = a.book.Observe(a.reports, now, &c, &seen)
	}

	if m.RetryAfter > 0 && status >= 400 { // negative: ignored
		a.pauseLocked(now.Add(min(m.RetryAfter, a.cfg.MaxDelay)))
	}
	if sig == response.Gone {
		// The quota is gone for good (billing): waiting cannot help and
		// nothing here should slow down for it. The caller gets the
		// response at once.
		a.retune(now)
		return
	}
	engaged := a.probe.Engaged() // Meter may let go of a probe that measured nothing
	a.probe.Meter(now, status < 400)
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
	a.infer.Stop()
	a.book.Drop((*quota.Window).Inferred)
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
	var c quota.Counts
	seen := quota.Seen{Horizon: a.horizon(), Age: a.rtt()}
	a.book.Observe(a.reports, now, &c, &seen)
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
		a.book.Drop(func(w *quota.Window) bool {
			return slices.ContainsFunc(stated, func(s statedQuota) bool { return s.name == w.Name() })
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
	return float64(m) / quota.Milli
}

// countsInto sets c to what the quota model needs of the in-flight and
// admission counts, with unseen requests in flight; called with a.mu held.
// Field by field, and the model takes c by pointer (see response.Read for
// why not whole values).
func (a *Adaptive) countsInto(c *quota.Counts, unseen float64) {
	c.Inflight, c.InflightCost = unseen, units(a.inflightCost.Load())
	c.Admitted, c.AdmittedCost = float64(a.admitted.Load()), units(a.admittedCost.Load())
	c.Blind = float64(max(a.admitted.Load()-a.hintedAdmits.Load(), 0))
	c.BlindInflight = float64(max(a.inflight.Load()-a.hinted.Load(), 0))
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
	var c quota.Counts
	a.countsInto(&c, float64(a.inflight.Load()))
	p := a.book.Plan(now, &c, max(units(a.avgCost.Load()), 1))
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
	var in decision.Input
	in.Started, in.Quotas, in.Blind = a.started.Load(), p.Known, p.Blind
	in.ReqRate, in.ReqBudget, in.TokRate, in.TokBudget = p.ReqRate, p.ReqBudget, p.TokRate, p.TokBudget
	in.ReqAtOnce, in.TokAtOnce = p.ReqAtOnce, p.TokAtOnce
	in.ProbeRate, in.ProbeEngaged, in.ProbeClosed = a.probe.Grow(now), a.probe.Engaged(), a.probe.Closed()
	in.InferTrial, in.TrialGate = a.infer.Trial(), infer.TrialInFlight
	in.Ceiling, in.CeilingBurst = float64(a.cfg.Ceiling), float64(a.cfg.CeilingBurst)
	in.MaxCost = units(a.maxCost.Load())
	in.Safety = a.safety
	in.Canonicalize()
	if a.decided && in == a.lastDecision && a.share == nil {
		// Decided and applied last time, and the buckets and the gate change
		// nowhere else (with a Store, apply also publishes what it set).
		return
	}
	a.decided, a.lastDecision = true, in
	d := decision.Make(in)
	a.mode = modes[d.Mode]
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
