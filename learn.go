package pacer

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/pacer-go/pacer/internal/header"
	"github.com/pacer-go/pacer/internal/infer"
	"github.com/pacer-go/pacer/internal/quota"
	"github.com/pacer-go/pacer/internal/response"

	"github.com/pacer-go/pacer/observe"
)

// What a response teaches the limiter, and the retune that applies the
// decision to the buckets (R52-R66).

// doneWith is Done for a response read as m (nil: none) that came at now.
func (p *Permit) doneWith(m *response.Meaning, now time.Time) {
	if !p.live {
		return
	}
	p.live = false
	untold := p.a.fleet != nil && p.a.fleet.answered(p.fleet, m, now)
	p.a.learn(m, p.seq, p.cost, now)
	if untold {
		p.a.tellInteractive(now)
	}
}

// learnOther applies what a response meant to a request another limiter
// admitted for the server's same bucket: nothing of ours leaves flight.
func (a *Adaptive) learnOther(m *response.Meaning) {
	a.learn(m, 0, 0, time.Time{})
}

// learnLate applies as learnOther a refusal stated after the response was
// settled (a stream's first event), less the admission its 200 counted (R58).
func (a *Adaptive) learnLate(m *response.Meaning) {
	now := time.Now()
	a.mu.Lock()
	a.learnLocked(m, 0, 0, now)
	a.requests--
	a.admitted.Add(-1)
	if c := a.avgCost.Load(); c > 0 {
		a.admittedCost.Add(-min(c, a.admittedCost.Load()))
	}
	a.changedLocked()
	a.unlock()
}

// maxFeeders bounds the limiters feed remembers: the host's and patterns'
// whose routes the server put in one bucket, a handful.
const maxFeeders = 8

// feed records that from admits requests the server may count against this
// limiter's quotas (R59).
func (a *Adaptive) feed(from *Adaptive) {
	if from == nil || from == a {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(a.feeders, from) && len(a.feeders) < maxFeeders {
		a.feeders = append(a.feeders, from)
	}
}

// settle takes a settled permit's request of the stated cost out of the
// in-flight count and returns how many are still out besides it.
func (a *Adaptive) settle(cost float64) int64 {
	others := a.inflight.Add(-1)
	if others < 0 {
		// A Permit copied before it was settled, which its doc forbids.
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

// learn applies what a response meant (m; nil: none came) to our request
// of the given cost and place in the admissions (seq), or to another
// limiter's (seq 0), at now (zero: read the clock). Ours leaves the
// in-flight count under mu, with the response applied (R1).
func (a *Adaptive) learn(m *response.Meaning, seq int64, cost float64, now time.Time) {
	if m != nil && m.Status != 0 && now.IsZero() {
		now = time.Now()
	}
	a.mu.Lock()
	a.learnLocked(m, seq, cost, now)
	a.changedLocked()
	if seq > 0 {
		a.wakeGateLocked() // a slot freed
	}
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
	// Ours leaves the in-flight count; another limiter's answer charged
	// here is ours (R58), and its request one of the feeders' (R59).
	var fed int64 // what the feeding limiters have in flight
	for _, b := range a.feeders {
		fed += max(b.inflight.Load(), 0)
	}
	others := fed
	if own {
		others += a.settle(cost)
	} else {
		fed = max(fed-1, 0)
		a.admitted.Add(1)
		a.admittedCost.Add(a.avgCost.Load())
		others = a.inflight.Load() + fed
	}
	wasStarted := a.started.Swap(true)
	a.requests++
	a.trackRTT(now, others)
	if m.Quotas.Len() > 0 || m.RetryAfter > 0 || m.Bucket != "" {
		a.lastInfo, a.lastQuotas = m.Info, m.Quotas // converted by their readers
	}
	if !m.Counted() {
		a.uncount(own, cost)
	}
	handoff, handoffSpan := a.readReports(m, now)
	exhausted := false // a report says a quota is spent; none without quotas
	if len(a.reports) > 0 || a.book.Len() > 0 {
		seen := quota.Seen{Horizon: a.horizon(), Age: a.rtt(), Seq: seq, Admissions: a.admissions.Load(),
			Refused: m.Status == http.StatusTooManyRequests, Fed: float64(fed)}
		exhausted = a.book.Observe(a.reports, now, a.counts(float64(others)), seen)
	}
	status, sig := m.Status, m.Body
	if m.RetryAfter > 0 && status >= 400 {
		a.pauseLocked(now.Add(min(m.RetryAfter, a.cfg.MaxDelay))) // R54
	}
	if sig == response.Gone || sig == response.TooLarge {
		a.retune(now) // gone for good, or above the whole limit: no wait helps
		return
	}
	engaged := a.probe.Engaged() // Meter may let go of a probe that measured nothing
	a.probe.Meter(now, status < 400)
	if status >= 400 {
		a.probe.Refused(now, m.RetryAfter)
	}
	switch {
	case sig == response.BodyLimit:
		a.bodyLimitLocked(now, m.RetryAfter, exhausted, others)
	case m.Throttled:
		a.throttledLocked(m, now, exhausted, others, handoff, handoffSpan)
	}
	if wasStarted && status < http.StatusBadRequest && sig == response.None && a.book.Len() == 0 && !engaged && !a.probe.Engaged() && m.RetryAfter == 0 {
		return // nothing the decision reads changed
	}
	a.retune(now)
}

// uncount takes back the admission of an answer the server did not count (R58).
func (a *Adaptive) uncount(own bool, cost float64) {
	a.admitted.Add(-1)
	switch c := a.avgCost.Load(); {
	case own && cost > 0:
		a.hintedAdmits.Add(-1)
		a.admittedCost.Add(-min(thousandths(cost), a.admittedCost.Load()))
	case own: // blind: counted by admitted alone
	case c > 0 && a.admittedCost.Load() >= c:
		a.admittedCost.Add(-c) // another limiter's, of a cost unknown here
	}
}

// readReports sets a.reports to what the response said of the quotas, the
// stated quotas' (R51) and the inferred one's; handoff is the rate the
// inferred model measured over span when it gives up, for the probe.
func (a *Adaptive) readReports(m *response.Meaning, now time.Time) (handoff float64, span time.Duration) {
	nq := m.Quotas.Len()
	a.reports = a.reports[:0]
	derived := derivedQuota(&m.Quotas)
	for i := range nq {
		q := m.Quotas.At(i)
		if derived != "" && q.Name == derived {
			continue
		}
		a.reports = append(a.reports, quota.Named{Name: q.Name, Tokens: q.Unit == header.Tokens,
			Report: quota.Report{Limit: q.Limit, Remaining: q.Remaining, Reset: q.Reset, Window: q.Window}})
	}
	switch stated := a.stated; {
	case len(stated) == 0:
	case nq > 0:
		a.book.Drop(func(name string) bool {
			return slices.ContainsFunc(stated, func(s statedQuota) bool { return s.name == name })
		})
		a.stated = nil
	default:
		for i := range stated {
			a.reports = append(a.reports, quota.Named{Name: stated[i].name, Report: stated[i].Answered(now, m.Counted())})
		}
	}
	if a.infer != nil && nq == 0 && m.Body == response.None {
		r, ok := a.infer.Observe(now, m.Status, m.RetryAfter)
		if a.infer.Off() {
			handoff, span = a.infer.Capacity(now)
		} else if ok {
			a.reports = append(a.reports, quota.Named{Name: infer.Name, Report: r})
		}
	}
	if a.infer != nil && (nq > 0 || a.infer.Off()) {
		a.infer = nil // the server states its quotas, or the model does not fit
		a.book.DropInferred()
	}
	return handoff, span
}

// throttledLocked reacts to a throttle (R56).
func (a *Adaptive) throttledLocked(m *response.Meaning, now time.Time, exhausted bool, others int64, handoff float64, span time.Duration) {
	a.throttled++
	switch {
	case m.Overloaded() && !exhausted && (len(a.reports) > 0 || a.book.Known()):
		// Overload while the quotas show room: retried under a budget.
	case len(a.reports) == 0 || !exhausted:
		if hold := a.probe.Throttle(now, others, a.rtt()); !hold.IsZero() {
			a.pauseLocked(hold)
		}
		a.probe.Adopt(handoff, span, now)
	}
	if l := a.cfg.Logger; l != nil {
		key, retryAfter, status := a.cfg.Key, m.RetryAfter, m.Status
		a.later(func() {
			l.LogAttrs(context.Background(), slog.LevelWarn, "pacer: throttled",
				slog.String("endpoint", key), slog.Int("status", status),
				slog.Duration("retry_after", retryAfter))
		})
	}
}

// state starts the quotas stated for the endpoint at now, as a server's
// statement of them would (R51): slow start is over before it began.
func (a *Adaptive) state(qs []Quota, now time.Time) {
	a.mu.Lock()
	a.stated, a.reports = a.stated[:0], a.reports[:0]
	for _, q := range qs {
		s := statedQuota{name: q.Name, Stated: quota.Stated{Limit: q.Limit, Window: q.Window}}
		a.reports = append(a.reports, quota.Named{Name: s.name, Report: s.Start(now)})
		a.stated = append(a.stated, s)
	}
	a.book.Observe(a.reports, now, quota.Counts{}, quota.Seen{Horizon: a.horizon(), Age: a.rtt()})
	a.started.Store(true)
	a.retune(now)
	a.changedLocked()
	a.unlock()
}

// counts is the model's view of the counts, with unseen requests in flight.
func (a *Adaptive) counts(unseen float64) quota.Counts {
	return quota.Counts{
		Inflight: unseen, InflightCost: units(a.inflightCost.Load()),
		Admitted: float64(a.admitted.Load()), AdmittedCost: units(a.admittedCost.Load()),
		Blind:         float64(max(a.admitted.Load()-a.hintedAdmits.Load(), 0)),
		BlindInflight: float64(max(a.inflight.Load()-a.hinted.Load(), 0)),
	}
}

// derivedQuota names the quota that only restates others (R60), or "".
func derivedQuota(qs *header.Quotas) string {
	has := func(name string) bool {
		for i := range qs.Len() {
			if qs.At(i).Name == name {
				return true
			}
		}
		return false
	}
	if has("input-tokens") && has("output-tokens") && has("tokens") {
		return "tokens"
	}
	return ""
}

// trackRTT keeps smoothed figures for Little's law (R61): the round trip is
// about the mean in-flight count times the mean interval between responses.
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

// horizon is how long a budget stands against a higher Remaining (R12, R61).
func (a *Adaptive) horizon() time.Duration {
	return min(max(2*a.rtt(), 20*time.Millisecond), 2*time.Second)
}

// pauseLocked holds every request until t, here and in the store (R54, R57).
func (a *Adaptive) pauseLocked(t time.Time) {
	if t.After(a.paused) {
		a.paused = t
		a.req.PauseUntil(t)
		if a.share != nil {
			a.later(func() { a.share.paused(t) })
		}
	}
}

// bodyLimitLocked applies a limit a response stated only in its body (R57;
// GitHub's secondary rate limits, as GitHub documents them).
func (a *Adaptive) bodyLimitLocked(now time.Time, retryAfter time.Duration, exhausted bool, others int64) {
	if !a.lastBodyLimit.IsZero() && now.Sub(a.lastBodyLimit) > bodyLimitMemory {
		a.bodyStrikes = 0
	}
	a.lastBodyLimit = now
	sameTrip := now.Before(a.bodyLimitUntil) // answers of requests out when it began
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
	a.probe.Punished(now, until, others, a.rtt(), bodyLimitCycle, bodyLimitMemory)
}

// The waits of body-stated limits (R57).
const (
	bodyLimitWait    = time.Minute      // GitHub documents at least a minute
	bodyLimitMaxWait = 15 * time.Minute // four doublings
	// bodyLimitMemory is how long one counts towards the doubling, and how
	// long the probe stays below what the server admitted.
	bodyLimitMemory = time.Hour
	// bodyLimitCycle is the least time the probe takes to climb back to
	// what the server admitted: a trip costs a minute's pause or more.
	bodyLimitCycle = 5 * time.Minute
)

// retune rolls the windows on to now, decides (makeDecision) and applies
// the decision to the buckets and the gate. Called with mu held.
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
	in := decisionInput{
		Started: a.started.Load(), Quotas: p.Known, Blind: p.Blind,
		Req: p.Req, Tok: p.Tok,
		ProbeRate: a.probe.Grow(now), ProbeEngaged: a.probe.Engaged(), ProbeClosed: a.probe.Closed(),
		InferTrial: a.infer != nil && a.infer.Trial(),
		Ceiling:    float64(a.cfg.Ceiling), CeilingBurst: float64(a.cfg.CeilingBurst),
		MaxCost: units(a.maxCost.Load()), Safety: a.safety,
	}
	in.canonicalize()
	if a.decided && in == a.lastDecision && a.share == nil {
		return // decided and applied last time (with a Store, apply also publishes)
	}
	a.decided, a.lastDecision = true, in
	d := makeDecision(in)
	a.mode = d.Mode
	a.apply(a.req, d.ReqLimit, d.ReqBurst, 1, min(float64(d.ReqBurst), in.Req.AtOnce), "requests", d.Reason)
	a.apply(a.tok, d.TokLimit, d.TokBurst, d.TokNeed, min(float64(d.TokBurst), in.Tok.AtOnce), "tokens", "quota")
	if d.Mode != observe.ModeSlowStart { // slow start keeps its gate (R52)
		a.setGateLocked(d.Gate)
	}
}

// apply sets a bucket's limit and burst when they changed enough to matter
// (R62), or the burst is below need (R66), and what may go at once (fill)
// as its level (R65).
func (a *Adaptive) apply(b *Bucket, rate float64, burst, need int, fill float64, what, reason string) {
	limit := Inf
	if !math.IsInf(rate, 1) {
		limit = Limit(rate)
	}
	old := b.Limit()
	setLimit, setBurst := keepLimit, keepBurst
	if (old != Inf) != (limit != Inf) || float64(limit) < float64(old)*0.99 || float64(limit) > float64(old)*1.02 {
		setLimit = limit
		if l := a.cfg.Logger; l != nil && (old == Inf || limit == Inf || math.Abs(float64(limit-old)) >= 0.1*float64(old)) {
			key, mode := a.cfg.Key, a.mode
			a.later(func() {
				l.LogAttrs(context.Background(), slog.LevelDebug, "pacer: retuned",
					slog.String("endpoint", key), slog.String("quota", what),
					slog.Float64("old", float64(old)), slog.Float64("new", float64(limit)),
					slog.String("mode", mode.String()), slog.String("reason", reason))
			})
		}
	}
	if old := b.Burst(); old != burst && (old < need || old < 10 || burst < old*9/10 || burst > old*11/10) {
		setBurst = burst
	}
	if fill > 0 {
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

// nextAllowed is when a request could start if Acquire were called now,
// for the Transport's retries. It changes nothing: a window whose reset
// passed shows free.
func (a *Adaptive) nextAllowed() time.Time {
	now := time.Now()
	at := a.req.nextAt(1)
	a.mu.Lock()
	at = laterTime(at, a.heldUntilLocked())
	a.unlock()
	return laterTime(now, at)
}

// heldUntilLocked is when the pause and spent request quotas let one go.
func (a *Adaptive) heldUntilLocked() time.Time {
	return laterTime(a.paused, a.book.HeldUntil())
}
