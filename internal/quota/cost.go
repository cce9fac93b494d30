package quota

import (
	"math"
	"time"
)

const (
	// costSample is the fewest blind requests a sample spans (R47).
	costSample = 8
	// firstSample is the fewest the first sample spans: with nothing
	// charged, blind requests meet 429s until it comes (R47).
	firstSample = 2
	// costMemory is how many blind requests the estimate averages over
	// (R50): prompts grow through a conversation.
	costMemory = 16
	// costWeight is a sample's weight in the variance's moving average (R50).
	costWeight = 0.25
	// costSpread is how many deviations above the mean a blind request is
	// charged (R50): all of a cost uniform within ±50% of its mean.
	costSpread = 2
)

// costEstimate is the learnt cost of a request that states none (a blind
// request; R47-R50): decayed sums of cost and requests, the variance, the
// sample under way, and what blind requests were charged, ever (milli-units).
type costEstimate struct {
	sum, n   float64
	variance float64
	from     costAnchor
	charged  int64
}

// costAnchor is where the sample under way started.
type costAnchor struct {
	remaining float64
	blind     float64 // blind requests the server had answered
	stated    float64 // stated costs of the hinted requests it had answered
	unseen    float64 // blind requests in flight
	ok        bool
	// refill is what a ToFull bucket refilled since the anchor, response by
	// response, never past its limit (R47).
	refill  float64
	last    time.Time
	lastRem float64
}

func (c *costEstimate) mean() float64 {
	if c.n == 0 {
		return 0
	}
	return c.sum / c.n
}

func (c *costEstimate) deviation() float64 { return math.Sqrt(c.variance) }

// blindAmount is what a blind request is charged, in milli-units (R50).
func (s *State) blindAmount() int64 {
	est := s.cost.mean()
	if est <= 0 {
		return 0
	}
	return min(max(milli(est+costSpread*s.cost.deviation()), Milli), s.size.most)
}

// countBlind adds amount (milli-units; negative for a refund) to what blind
// requests were charged.
func (s *State) countBlind(cost float64, amount int64) {
	if !(cost > 0) && s.cfg.Tokens {
		s.cost.charged += amount
	}
}

// sampleCost folds what q says into the estimate (R47-R49); fresh is as
// Observe read it.
func (s *State) sampleCost(q *Report, now time.Time, seen *Seen, fresh bool) {
	if seen.Refused {
		return // its request was not counted (R49)
	}
	a := &s.cost.from
	next := costAnchor{remaining: q.Remaining, blind: seen.Blind - seen.BlindUnseen,
		stated: seen.Stated, unseen: seen.BlindUnseen, ok: true, last: now, lastRem: q.Remaining}
	limit := s.Limit()
	if a.ok && s.kind == ToFull {
		a.refill += max(min(s.drift.rate*now.Sub(a.last).Seconds(), limit-a.lastRem), 0)
	}
	a.last, a.lastRem = now, q.Remaining
	switch {
	case !a.ok && s.cost.mean() == 0 && next.blind == 1 && next.unseen == 0 && next.stated == 0 &&
		q.Remaining >= limit/2 && q.Remaining < limit:
		s.cost.add(limit-q.Remaining, 1) // the first look's answer (R48)
	case !a.ok || next.blind < a.blind || next.stated < a.stated,
		(fresh || s.kind.refills()) && s.kind != ToFull, q.Remaining >= limit:
		// Start afresh: the first figure, or R49's cases.
	default:
		if !s.takeSample(q, next) {
			return // keep the anchor: the sample grows
		}
	}
	*a = next
}

// takeSample takes the sample from the anchor to next, if it spans enough
// blind requests (R47), and reports whether the anchor moves on: also when
// fewer are in flight than at the anchor.
func (s *State) takeSample(q *Report, next costAnchor) bool {
	a := &s.cost.from
	n := next.blind - a.blind
	least := float64(costSample)
	if s.cost.mean() == 0 {
		least = firstSample
	}
	if n < max(least, 2*(a.unseen+next.unseen)) {
		return max(least, 2*a.unseen)-n > max(least, 2*next.unseen)
	}
	used := a.remaining - q.Remaining - (next.stated - a.stated)
	if s.kind == ToFull {
		used += a.refill
	}
	if c := used / n; c >= 0 && !math.IsInf(c, 0) {
		s.cost.add(min(c, s.Limit()), n)
	}
	return true
}

// add folds the mean cost of n blind requests into the estimate (R50), each
// sample weighing as many as it spans; the squared difference times
// nN/(n+N) estimates the variance.
func (c *costEstimate) add(cost, n float64) {
	est := c.mean()
	if est == 0 {
		c.variance, c.sum, c.n = cost*cost/4, cost*n, n
		return
	}
	d := cost - est
	weight := n * c.n / (n + c.n)
	keep := math.Exp(-n / costMemory)
	c.sum, c.n = c.sum*keep+cost*n, c.n*keep+n
	c.variance += costWeight * (weight*d*d - c.variance)
}
