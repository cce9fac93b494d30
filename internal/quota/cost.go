package quota

import (
	"math"
	"time"
)

// What a request costs a token quota when the caller does not say (a blind
// request): learnt from the quota's own figures, charged at admission, and
// trued up by every response, whose Remaining less what is still in flight
// replaces the budget the charges came out of (reserve, then reconcile).
//
// Between two responses of one window the quota fell by what the server
// counted in between, less what it refilled: Remaining then − Remaining now
// (+ the refill over the time between, for a bucket whose responses state
// it, see readsToFull, as far as the bucket had room for it). The server counted the requests answered in between,
// give or take those in flight at either end (counted on arrival, answered
// later). Over enough requests that error is small, and what is left after
// the stated costs of the hinted requests among them, over the blind ones,
// is the cost of a blind request. Others spending from the quota raise it:
// a request then pays for their share too, which leaves them room.
//
// A blind request is charged a high estimate of its cost (the mean plus
// costSpread deviations): where the quota has room for the mean but not for
// a request that is dearer than most, the server refuses the dear one.

// costSample is the fewest blind requests one sample of the cost is taken
// over; a sample also spans at least twice the blind requests in flight at
// its ends, so that the server's having counted them or not moves it by at
// most a half of one.
const costSample = 8

// firstSample is the fewest blind requests the first sample is taken over.
const firstSample = 2

// costMemory is how many blind requests the estimate averages over: the
// weight of a request's sample halves about every 11 requests after it
// (prompts grow through a conversation, and a stale estimate costs 429s
// when it is low), and a sample weighs as many requests as it spans, so a
// small first one is soon outweighed.
const costMemory = 16

// costWeight is the weight of each new sample in the variance's moving
// average: about four samples.
const costWeight = 0.25

// costSpread is how many standard deviations of one request's cost, above
// the mean, a blind request is charged: two cover all of a cost uniform
// within ±50% of its mean (1.58 means against 1.5) and about 97% of a
// normal one.
const costSpread = 2

// costAnchor is where the sample being taken started.
type costAnchor struct {
	remaining float64
	blind     float64 // blind requests the server had answered
	stated    float64 // stated costs of the hinted requests it had answered
	unseen    float64 // blind requests in flight
	ok        bool
	// refill is what a bucket that states its refill (toFull) refilled
	// since the anchor, response by response: the refill since the last
	// one (last, lastRem), but never past the limit. A bucket stops
	// filling when full, and one paced below its refill is full between
	// requests (a high cost estimate paces it so: a request waits for
	// room for two): the whole refill over the sample counted what
	// never came in, the sample came out high, the estimate rose, and
	// the pace slowed further (learnt costs 60% to 100% high for
	// minutes, one run in ten). Capped, the sample errs low when a
	// request came in late between full responses (the refill after it
	// is not counted), which quickens the pace and ends it.
	refill  float64
	last    time.Time
	lastRem float64
}

// Estimate is the learnt mean cost of a blind request, in units; 0 while
// unknown and for a request quota.
func (w *Window) Estimate() float64 {
	if w.estN == 0 {
		return 0
	}
	return w.estSum / w.estN
}

// Deviation is the learnt standard deviation of a blind request's cost.
func (w *Window) Deviation() float64 { return math.Sqrt(w.estVar) }

// countBlind adds amount (milli-units; negative for a refund) to what blind
// requests were charged, when cost says the request was blind and the
// quota counts tokens.
func (w *Window) countBlind(cost float64, amount int64) {
	if !(cost > 0) && w.tokens {
		w.blindCharged += amount
	}
}

// BlindCharge is what a blind request is charged, in units (see
// blindAmount).
func (w *Window) BlindCharge() float64 { return float64(w.blindAmount()) / Milli }

// blindAmount is what a blind request is charged, in milli-units: the
// estimate plus costSpread deviations, at least a unit once known, never
// more than the quota holds; 0 while nothing is learnt (the request is
// charged to the request quotas only, as before any response).
func (w *Window) blindAmount() int64 {
	est := w.Estimate()
	if est <= 0 {
		return 0
	}
	return min(max(ToMilli(est+costSpread*w.Deviation()), Milli), w.most)
}

// sampleCost folds what q says into the estimate of a blind request's cost.
// It is called at the end of observe for a token quota, with fresh as
// observe read it (the response opened a new window, or moved a reset).
func (w *Window) sampleCost(q *Report, now time.Time, seen *Seen, fresh bool) {
	if seen.Refused {
		return // its request was not counted; the figures say nothing new
	}
	a := &w.estFrom
	next := costAnchor{remaining: q.Remaining, blind: seen.Blind - seen.BlindUnseen,
		stated: seen.Stated, unseen: seen.BlindUnseen, ok: true, last: now, lastRem: q.Remaining}
	limit := w.limitOrPeak()
	if a.ok && w.toFull {
		// What the bucket refilled since the last response, as far as
		// it could hold it (see costAnchor.refill).
		a.refill += max(min(w.drift*now.Sub(a.last).Seconds(), limit-a.lastRem), 0)
	}
	a.last, a.lastRem = now, q.Remaining
	switch {
	case !a.ok || next.blind < a.blind || next.stated < a.stated:
		// The first figure, or counts that went back (an abandoned
		// request, a refusal): start afresh.
	case fresh && !w.toFull, w.kind == kindSmooth && !w.toFull:
		// A new fixed window (its figures are not comparable with the
		// last one's), or a refill no response states, which spending
		// cannot be told from.
	case q.Remaining >= limit:
		// Full now: the refill stopped for a while no one knows, and
		// what was spent before it did is lost from the figures.
	default:
		n := next.blind - a.blind
		least := float64(costSample)
		if w.Estimate() == 0 {
			// The first estimate is wanted soon: with nothing charged,
			// blind requests meet 429s until it comes. Its doubt is
			// in the deviation assumed (see addSample).
			least = firstSample
		}
		if n < max(least, 2*(a.unseen+next.unseen)) {
			if max(least, 2*a.unseen)-n <= max(least, 2*next.unseen) {
				return // keep the anchor: the sample grows
			}
			// A start here, with fewer in flight than at the anchor,
			// is taken sooner than the sample grows to twice those
			// (a burst's anchor would hold the sample back for twice
			// the burst). Not one with merely fewer: a sample most of
			// the way there started again whenever the one in flight
			// at its anchor had none at its side, and at a request
			// every 10 s, an estimate 100% high stood for two
			// minutes.
			break
		}
		used := a.remaining - q.Remaining - (next.stated - a.stated)
		if w.toFull {
			used += a.refill
		}
		if c := used / n; c >= 0 && !math.IsInf(c, 0) {
			w.addSample(min(c, limit), n)
		}
	}
	*a = next
}

// addSample folds the mean cost c of n blind requests into the estimate
// (an average over about costMemory requests, each sample weighing as many
// as it spans) and its variance. A mean over n requests varies by 1/n of
// one request's variance, and the estimate, over the N it weighs, by 1/N:
// their squared difference, times nN/(n+N), estimates the latter. (n
// times it alone took the estimate's own error for spread: after a first
// sample of 2 that was 95% high, the next, of 8, put the deviation at
// 1.6 times the mean, and the charge, the mean and two deviations, at
// nearly half the quota, which then paced a request only when full.)
func (w *Window) addSample(c, n float64) {
	est := w.Estimate()
	if est == 0 {
		// Until samples show the spread, a deviation of half the mean
		// is assumed (a cost anywhere within ±87% of it).
		w.estVar, w.estSum, w.estN = c*c/4, c*n, n
		return
	}
	d := c - est
	weight := n * w.estN / (n + w.estN)
	keep := math.Exp(-n / costMemory)
	w.estSum, w.estN = w.estSum*keep+c*n, w.estN*keep+n
	w.estVar += costWeight * (weight*d*d - w.estVar)
}
