// Package infer learns the quota of a server that states none and only
// answers 429 with a Retry-After when it is spent: a fixed window whose size
// and length it keeps to itself. The Retry-After of a refusal says when the
// window ends, the successes since the last end how much it holds, the time
// between two ends how long windows are. From these a [Model] states the
// quota the server would have stated ([quota.Report]), which the limiter
// spends like a stated one. The model gives up (Off) on servers it does not
// fit, which the CUBIC fallback then paces.
//
// A Model is a state machine with explicit time; it takes no lock and reads
// no clock.
package infer

import (
	"cmp"
	"math"
	"time"

	"github.com/pacer-go/pacer/internal/quota"
)

// Model learns the quota of a server that states none and only answers
// 429 with a Retry-After when it is spent: a fixed window whose size and
// length it keeps to itself. Such a server says more than it seems to. The
// Retry-After of a 429 says when the window ends; the successes since the
// last window ended say how much it holds; the time between two ends says
// how long windows are. From these the limiter builds the quota the server
// would have stated, and spends it like a stated one: all of it at once
// when the work wants it, then one look when the next window is due
// (package quota). CUBIC (package cubic), which only cuts and climbs a rate, meets
// the window's end every cycle: 1.3% of requests refused at 0.91 of the
// quota over twelve windows, against at most two after the first window here.
//
// The model is wrong for servers that refill as they go (a token bucket
// answering with the time to its next token): each cycle then measures
// what the bucket refilled in a cycle, which is the right figure too,
// spent at the start of each cycle rather than spread. A window it
// overestimates refuses a request early; that 429 corrects the estimate
// (the successes of that window) and the reset (its Retry-After). Requests
// of other clients are in what each window measures; the estimate only
// ever follows the last window (a client that had more never sees it
// again unless a window ends early), which is what a shared quota needs.
//
// Resets are upper bounds. Retry-After is whole seconds, rounded up by
// every server that says how it rounds (apisim too), so a window's end
// is known within a second, late. Window lengths learned from two ends are
// rounded to whole seconds when the Retry-After was whole: the errors of
// the two readings would otherwise add up window after window.
type Model struct {
	limit float64   // successes the last window that ended in a 429 admitted; 0: none yet
	ok    float64   // successes since the current window began
	total float64   // successes since start
	start time.Time // first response: the first window began no later
	// refused and before: the first refusal, and the successes up to it
	// (see Capacity).
	refused time.Time
	before  float64
	reset   time.Time     // end of the current window: stated, or predicted from window
	stated  time.Time     // the last end a Retry-After stated
	window  time.Duration // learned length; 0 while unknown
	guess   time.Duration // lower bound of window before it is learned
	whole   bool          // Retry-After values come in whole seconds
	off     bool          // the model did not fit the server: it has no say
	// confirmed: a window after a stated end held at least half of the
	// last, as a fixed window does. Until then a window is spent with at
	// most TrialInFlight requests out, so a server the model misreads
	// (a sliding window, a token bucket) refuses that many, not one per
	// caller.
	confirmed bool
	// predicted: the current window began at an end the model predicted,
	// not one a refusal stated.
	predicted bool
	// measured: the limit was counted in the window the last refusal
	// closed, so answers still coming in for it add to it.
	measured bool
	// windows counts the windows seen begin; surprises, the refusals of
	// windows the count said had room.
	windows, surprises int
	// statedAt is windows when the last stated end was learned: the
	// windows begun since are windows − statedAt (see learnWindow).
	statedAt int
}

// maxSurprises is how many early refusals the model is allowed
// before it gives up, if they come in more than a quarter of
// windows: learning a window's length costs one or two (an early first
// guess, a phase late by a second of rounding); a server the model
// misreads refuses early in every window.
const maxSurprises = 3

// TrialInFlight caps the requests in flight while the model is on
// trial: a misread window costs at most 8 refusals, and a real one of 100
// is still spent in 13 round trips, well within any window a server would
// state in whole seconds.
const TrialInFlight = 8

// Off reports whether the model has no say: it did not fit the server.
// (When the server states a quota, its owner drops the model.)
func (m *Model) Off() bool { return m.off }

// Trial reports whether the model states a quota it has not yet seen hold.
func (m *Model) Trial() bool { return !m.off && m.limit > 0 && !m.confirmed }

// Name names the quota the model states. A server's own quota
// cannot collide: parsed names never contain a space.
const Name = "inferred window"

// Observe takes a response to a request sent to a server that stated no
// quota and returns the quota it implies, if the model knows one yet.
func (m *Model) Observe(now time.Time, status int, retryAfter time.Duration) (quota.Report, bool) {
	if m.off {
		return quota.Report{}, false
	}
	if status < 400 && m.limit == 0 && m.reset.IsZero() && m.stated.IsZero() && !m.start.IsZero() {
		// A success before any refusal stated an end (nearly every answer
		// of a server that states nothing): what the steps below make of
		// it, a success counted and no quota yet, without the steps (half
		// of observing it).
		m.ok++
		m.total++
		return quota.Report{}, false
	}
	if m.start.IsZero() {
		m.start = now
	}
	m.advance(now)
	closed := !m.stated.IsZero() && now.Before(m.stated)
	if status != 429 {
		switch {
		case status >= 400:
		case closed && m.measured:
			// Answered after the refusal that closed the window, but
			// counted in it: concurrent answers come in any order.
			m.limit++
		case closed:
		default:
			m.ok++
		}
		if status < 400 {
			m.total++
		}
		return m.quota(now)
	}
	if retryAfter <= 0 {
		if m.limit == 0 {
			return quota.Report{}, false // a bare 429 is the probe's to read
		}
		// Once the model runs, a refusal without a wait is one more
		// second closed (the shortest a Retry-After says).
		retryAfter = time.Second
	}
	end := now.Add(retryAfter)
	if m.refused.IsZero() {
		m.refused, m.before = now, m.total
	}
	if closed {
		// One more refusal of the closed spell: requests that were in
		// flight when the window ran out. The earliest end is the
		// tightest of upper bounds.
		if end.Before(m.stated) {
			m.stated = end
		}
		m.reset = m.stated
		return quota.Report{Limit: m.limit, Reset: m.reset, Window: m.window}, true
	}
	if m.limit == 0 && m.ok == 0 {
		return quota.Report{}, false // spent by others before we learned anything
	}
	// A window the model only predicted (advance) that refuses early is
	// the old one still: the prediction was early, not the limit wrong.
	early := m.predicted && m.ok < m.limit/2
	if !early && m.limit > 0 && m.ok > 0 && m.ok < m.limit/2 {
		// The window that just opened held less than half of the last:
		// the server frees its quota as it goes (a sliding window still
		// weighed down by the last one, a token bucket), or others now
		// spend it. Windows spent at once would then meet a refusal
		// every time: that is the probe's to pace (package cubic).
		m.off = true
		return quota.Report{}, false
	}
	if m.limit > 0 && m.ok < m.limit {
		// A fixed window refuses before its count runs out only while
		// the model learns its length. One that keeps doing so is not a
		// fixed window (a token bucket answering with the time to its
		// next token, a sliding one): the probe's.
		m.surprises++
		if m.surprises >= maxSurprises && m.surprises*4 > m.windows {
			m.off = true
			return quota.Report{}, false
		}
	}
	m.windows++
	m.whole = retryAfter%time.Second == 0
	// The window this refusal closed measured the limit (and, if one was
	// known, confirmed it held about as much) unless it was the early
	// end of a prediction.
	m.measured = !early && m.ok > 0
	if m.measured {
		m.confirmed = m.confirmed || m.limit > 0
		m.limit = m.ok
	}
	switch {
	case !m.stated.IsZero():
		m.learnWindow(end.Sub(m.stated), early, m.windows-1-m.statedAt)
	default:
		// The first window began at or before the first request, which
		// was sent a round trip before the first response; the stated
		// end is late by the rounding of Retry-After and the trip back.
		// Less a second for these, the time from the first response to
		// the end is about the length, too short rather than too long:
		// a look at an early end meets one refusal and teaches the
		// length, one at a late end wastes the time between, every
		// window, and is never refused to learn better.
		m.guess = end.Sub(m.start)
		if m.whole {
			m.guess -= time.Second
		}
		m.guess = max(m.guess, end.Sub(m.start)/2)
	}
	m.stated, m.reset, m.ok, m.predicted = end, end, 0, false
	m.statedAt = m.windows
	return quota.Report{Limit: m.limit, Reset: end, Window: m.window}, true
}

// learnWindow takes d, the time between two stated ends. A multiple of the
// known length is a window that went by without a refusal; anything else
// is a new length. early marks the refusal that stated the second end as
// the early end of a prediction (see Observe), begun the windows the model
// saw begin since the first end, the one the refusal came in included.
func (m *Model) learnWindow(d time.Duration, early bool, begun int) {
	if d <= 0 {
		return
	}
	// Windows predicted in between ended without a refusal: d spans k of
	// them, k judged by the length known (or guessed).
	if base := cmp.Or(m.window, m.guess); base > 0 {
		k := max(math.Round(float64(d)/float64(base)), 1)
		if early && m.window == 0 {
			// But a guess is a lower bound, and an early refusal has just
			// shown it short: the window the refusal came in had not
			// begun where the guess said. d spans at most the windows
			// seen begin before it; k counted by the guess alone, a 1 s
			// window first guessed at 0.5 s, whose stated ends came
			// 1.51 s apart (whole seconds, rounded up), was learned as
			// 0.5 s: every other window then refused its look, until
			// the model gave the server up as one that is no fixed
			// window.
			k = max(min(k, float64(begun-1)), 1)
		}
		d /= time.Duration(k)
	}
	switch {
	case m.whole && d >= 2*time.Second:
		d = d.Round(time.Second)
	case m.whole && d > time.Second:
		// Ends stated in whole seconds, each late by up to one, are
		// between 0 and 2 s apart for a window of one second: one
		// learned longer would hold back up to half of every window
		// (a token bucket of 10 a second, its ends 1.5 s apart, was
		// spent at 0.62 of its rate), where one too short costs a
		// refusal that corrects it.
		d = time.Second
	}
	if w := m.window; w > 0 {
		slack := w / 10
		if m.whole {
			slack = max(slack, time.Second)
		}
		if (d - w).Abs() <= slack {
			return
		}
	}
	m.window = d
}

// advance moves the current window on when its end has passed: by the
// learned length, or by the first window's lower bound while unlearned (a
// look at an early end meets one 429, whose Retry-After teaches the length).
func (m *Model) advance(now time.Time) {
	if m.reset.IsZero() || now.Before(m.reset) {
		return
	}
	step := m.window
	if step <= 0 {
		step = m.guess
	}
	if step <= 0 {
		m.reset = time.Time{}
		return
	}
	if m.limit > 0 && m.ok >= m.limit/2 {
		// A window held half the limit or more and ended without a
		// refusal, where the model said it would: a fixed window.
		m.confirmed = true
	}
	n := now.Sub(m.reset)/step + 1
	// The window now beginning began at a stated end, unless one or more
	// predicted ends passed since.
	m.predicted = n > 1 || !m.reset.Equal(m.stated)
	m.windows += int(n)
	m.reset = m.reset.Add(n * step)
	m.ok = 0
}

// quota is the current window as a server that stated it would have.
func (m *Model) quota(now time.Time) (quota.Report, bool) {
	if m.limit == 0 || !m.reset.After(now) {
		return quota.Report{}, false
	}
	left := max(m.limit-m.ok, 0)
	if now.Before(m.stated) {
		left = 0 // closed until the end a refusal stated
	}
	return quota.Report{Limit: m.limit, Remaining: left, Reset: m.reset, Window: m.window}, true
}

// Capacity is what the server admitted per second: the rate the probe
// starts from when the model gives up. When the model gives up soon after
// the first refusal (within twice the time the first window took to run
// out), the server refills as it goes and what it admitted since that
// refusal is its refill: the first window held what the server had saved
// up, a token bucket's whole burst (600 in a second from one that refills
// 10 a second), and the probe started from the whole history ran twenty
// times too fast, a refusal for each request in flight on its first
// cycle. When it gives up later (a sliding window closed for most of a
// window after its first burst), the whole history since the first
// response spans about a window, and is the rate.
func (m *Model) Capacity(now time.Time) (rate float64, span time.Duration) {
	from, ok := m.start, m.total
	if first := m.refused.Sub(m.start); !m.refused.IsZero() && m.total > m.before && now.Sub(m.refused) <= 2*first {
		from, ok = m.refused, m.total-m.before
	}
	span = now.Sub(from)
	if span <= 0 || ok == 0 {
		return 0, 0
	}
	return ok / span.Seconds(), span
}
