package pacer

import (
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/clock"
)

// Coasting: a response that says only what the limiter already knows is
// settled without being parsed or learnt.
//
// A client far below its quota gets the same headers response after
// response: the same limit, reset and resource, Remaining one lower each
// time; or, from a server that states no quota, no rate-limit field at
// all. Parsing and learning each of them cost a GitHub-style response
// about 600 ns of the 900 pacer spent on it, the most of what a loopback
// round trip paid for pacer (issue 13). Learning them changes nothing a
// decision reads while the quota is far from binding: the limiter's own
// admissions already count its budget down.
//
// So after a response it learnt in full, a limiter whose quotas all have
// at least half their limit left (or that has none and was never refused),
// with nothing else going on (no pause, no probe, no gate, no store), lets
// the next responses coast, at most coastRun of them and only for requests
// admitted within coastSpan, if each matches the one learnt: the same
// header fields, the same values but for Remaining counts, and those still
// at or above half the limit. A coasting response settles its request (it
// leaves the in-flight count, and wakes those waiting for an answer), is
// counted, and lowers its quota's lowest figure in the window (which tells
// an overtaken response from news); the next response learnt in full folds
// the coasted ones into what it learns from every response (the
// round-trip estimate, the probe's meter, the inference's successes).
// Anything else, including a 429, any other status than 2xx, a header more
// or less, a changed reset, or a Remaining under half the limit, is learnt
// at once.
//
// What coasting gives up is noticing others' spending a few responses
// later: at most coastRun responses or coastSpan, while half the quota is
// left. Someone else would have to spend half the quota in that time for
// it to matter, and even then the next response learnt sees it. And the
// header is compared by its size and the fields the learnt response had:
// a rate-limit field that appears in place of another field would be read
// only with the next response learnt.

const (
	// coastRun is how many responses in a row may coast before one is
	// learnt in full: the full path's cost (about 800 ns for a GitHub-style
	// response) spread over 32 responses is 25 ns each, under what a
	// coasting response costs itself (its Remaining read, the settling).
	coastRun = 31
	// coastSpan is the longest a limiter coasts on one response learnt
	// (counted in admissions, which a coasting response need not read the
	// clock for): a fifth of a typical API round trip (about 250 ms), so
	// that a client sending a few requests per round trip learns nearly
	// every response, and only one sending hundreds coasts.
	coastSpan = 50 * time.Millisecond
	// coastFloor is the share of a quota's limit that must be left for its
	// responses to coast: below it the quota can bind within the window,
	// and every response counts.
	coastFloor = 0.5
)

// coasts reports whether a response with this status and header may
// coast (see above), taking one of the coasting responses the last
// response learnt allowed, and fills c with what coast needs of it. at is
// when its request was admitted, on the package clock: the span is counted
// in admissions, so that a response that coasts needs no clock reading.
func (a *Adaptive) coasts(status int, h http.Header, at int64, c *coasting) bool {
	if a.coastLeft.Load() <= 0 || status < 200 || status > 299 || at > a.coastUntil.Load() {
		return false
	}
	if c.p = a.print.Load(); c.p == nil || c.p.dead.Load() {
		return false
	}
	if !c.p.matches(h, &c.left) {
		if !c.p.used.Load() {
			// Not even the next response matched: a server whose fields
			// change with every response. Stop comparing with it.
			c.p.dead.Store(true)
		}
		return false
	}
	if a.coastLeft.Add(-1) < 0 {
		return false
	}
	if !c.p.used.Load() {
		c.p.used.Store(true)
	}
	return true
}

// coast settles p for a response that coasts (c, from coasts): what Done
// does but learning, except that the response's Remaining figures are kept
// for Stats and lower each quota's lowest figure in its window. That is what tells an overtaken response (an
// older, higher figure read later) from news: learnt after responses that
// coasted, it would otherwise raise the budget and read as a refill, and
// the next figure as someone else's spending.
func (p *Permit) coast(c *coasting) {
	if !p.live {
		return
	}
	p.live = false
	a := p.a
	// Under mu, as learn settles: a learn running meanwhile counts the
	// request either as in flight or as settled before it read the
	// server's figure, never as neither.
	a.mu.Lock()
	a.settle(p.cost)
	a.requests++
	a.coasted++
	a.applied.Add(1)
	if c.p == a.print.Load() { // still the window the print was made in
		for i, q := range c.p.counts {
			if w := a.find(q.quota); w != nil && w.known && !w.rolled {
				w.low = min(w.low, c.left[i])
			}
			// What Stats reports is the newest response's: it said what
			// the last one learnt said, but for these figures.
			for j := range a.lastQuotas {
				if a.lastQuotas[j].Name == q.quota {
					a.lastQuotas[j].Remaining = c.left[i]
					break
				}
			}
		}
	}
	a.mu.Unlock() // nothing was queued: no unlock flush
	a.wakeResponseWaiters()
}

// notePrint keeps h as what the responses that may coast must match, once
// the response it came with was learnt and allowed coasting. A print that
// h matches already is kept: a new one is made when the fields change (a
// new window, another resource), not for every response learnt. A server
// whose fields change with every response (a reset stated in seconds from
// now, the IETF field holding Remaining) would have a print made, at the
// cost of a second parse and an allocation, for every response learnt and
// never matched, and every response compared with it: a print the first
// response compared fails to match is not compared again (see coasts), and
// after a print that nothing matched, the next is made only after twice as
// many responses learnt as the last time, up to maxPrintSkip.
func (a *Adaptive) notePrint(status int, h http.Header) {
	if status < 200 || status > 299 || a.coastLeft.Load() <= 0 {
		return
	}
	old := a.print.Load()
	if old != nil && !old.dead.Load() && old.matches(h, nil) {
		return
	}
	if old != nil && !old.used.Load() {
		if a.printSkip.Add(-1) >= 0 {
			return
		}
		wasted := min(2*a.printWasted.Load()+1, maxPrintSkip)
		a.printWasted.Store(wasted)
		a.printSkip.Store(wasted)
	} else if a.printWasted.Load() != 0 {
		a.printWasted.Store(0)
	}
	a.print.Store(newSteadyPrint(h))
}

// maxPrintSkip bounds the responses learnt between two prints of a server
// whose prints nothing matches: a server that settles into steady answers
// later (its window's first responses were overtaken ones) coasts within
// about a hundred responses of it.
const maxPrintSkip = 127

// allowCoastLocked lets the next responses coast after one learnt at now,
// if nothing but the quotas' budgets is in play and each has at least
// coastFloor of its limit left; otherwise no response coasts until one is
// learnt that allows it. Called with mu held, at the end of a learn.
func (a *Adaptive) allowCoastLocked(status int, info Info, sig signal, nquotas int, own bool, now time.Time) {
	span := coastSpan
	// A server that states no quota coasts too while nothing was ever
	// refused: a success then only counts (the probe's meter, the
	// inference's successes), and folded counts are the same counts.
	stated := nquotas > 0 && len(a.windows) > 0 && a.mode == ModeHeaders
	none := nquotas == 0 && len(a.windows) == 0 && a.infer.idle() && (a.mode == ModeProbing || a.mode == ModeStatic)
	ok := own && status >= 200 && status <= 299 && sig == signalNone && info.RetryAfter == 0 && (stated || none) &&
		a.share == nil && a.fed() == 0 && !a.gated.Load() &&
		!a.probe.engaged && !now.Before(a.paused) && !now.Before(a.bodyLimitUntil)
	for _, w := range a.windows {
		if !ok {
			break
		}
		ok = w.known && !w.rolled && !w.probing && !w.inferred && w.kind != kindSmooth &&
			w.limit > 0 && w.units() >= coastFloor*w.limit && w.reset.After(now)
		span = min(span, w.reset.Sub(now))
	}
	if !ok {
		if a.coastLeft.Load() != 0 {
			a.coastLeft.Store(0)
		}
		return
	}
	a.coastUntil.Store(clock.Of(now) + int64(span))
	if a.coastLeft.Load() != coastRun { // a server that never coasts: no write
		a.coastLeft.Store(coastRun)
	}
}

// foldCoastedLocked counts the responses that coasted since the last one
// learnt in the probe's meter (successes), as learning each would have,
// and returns how many there were, for the round-trip estimate (trackRTT).
// Called with mu held, first in a learn.
func (a *Adaptive) foldCoastedLocked() int64 {
	k := a.coasted
	if k != 0 {
		a.coasted = 0
		a.probe.meterSuccesses(k)
		a.infer.succeeded(k)
	}
	return k
}
