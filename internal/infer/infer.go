// Package infer learns the quota of a server that states none and answers
// 429 with a Retry-After once it is spent: a fixed window whose size and
// length it keeps to itself. A refusal's Retry-After says when the window
// ends, the successes since the last end how much it holds, the time between
// two ends how long windows are. A [Model] states that as the quota the
// server would have stated ([quota.Report]).
//
// Retry-After is in whole seconds (RFC 9110, section 10.2.3), rounded up by
// servers: an end is known within a second, late, and lengths learnt from
// whole-second ends are whole seconds. A window the model overestimates
// refuses a request early, which corrects it. A server it does not fit (one
// that refills as it goes refuses early in every window) is given up
// ([Model.Off]) to the CUBIC fallback at the rate it admitted
// ([Model.Capacity]). A Model takes the time as an argument; it takes no lock
// and reads no clock.
package infer

import (
	"cmp"
	"math"
	"time"

	"github.com/pacer-go/pacer/internal/quota"
)

// Model is the learnt window of one endpoint.
type Model struct {
	limit     float64   // successes the last window a 429 closed admitted; 0: none yet
	ok, total float64   // successes in the current window; since start
	start     time.Time // the first response: the first window began no later
	refused   time.Time // the first refusal, and the successes before it
	before    float64
	reset     time.Time // the current window's end: stated, or predicted
	stated    time.Time // the last end a Retry-After stated
	window    time.Duration
	guess     time.Duration // a lower bound on window until it is learnt
	whole     bool          // Retry-After values come in whole seconds
	off       bool
	// confirmed: a window after a stated end held half the last or more, as
	// a fixed window does; until then at most TrialInFlight requests go out.
	confirmed bool
	predicted bool // the current window began at a predicted end
	measured  bool // the last refusal's window counted the limit: its late answers add to it
	// windows counts the windows seen begin, surprises the refusals of
	// windows the count said had room, statedAt windows at the last stated end.
	windows, surprises, statedAt int
}

const (
	// Name names the quota the model states. A server's own quota cannot
	// collide: parsed names never contain a space.
	Name = "inferred window"
	// TrialInFlight caps the requests in flight while the model is on trial:
	// a misread window costs 8 refusals at most, a real one of 100 13 trips.
	TrialInFlight = 8
	// maxSurprises is the early refusals the model allows, if they come in
	// more than a quarter of windows: learning a length costs one or two.
	maxSurprises = 3
)

// Off reports whether the model did not fit the server: from then on it has
// no say, and its owner drops it (as when the server states a quota).
func (m *Model) Off() bool { return m.off }

// Trial reports whether the model states a quota it has not yet seen hold.
func (m *Model) Trial() bool { return m.limit > 0 && !m.confirmed }

// Observe takes a response to a request sent to a server that stated no
// quota and returns the quota it implies, if the model knows one yet.
func (m *Model) Observe(now time.Time, status int, retryAfter time.Duration) (quota.Report, bool) {
	if m.start.IsZero() {
		m.start = now
	}
	m.advance(now)
	closed := !m.stated.IsZero() && now.Before(m.stated)
	switch {
	case status == 429:
		return m.refusal(now, retryAfter, closed)
	case status >= 400:
		return m.quota(now)
	case closed && m.measured:
		m.limit++ // answered after the refusal that closed the window, but counted in it
	case !closed:
		m.ok++
	}
	m.total++
	return m.quota(now)
}

// refusal takes a 429 at now; closed: a stated end has not passed yet.
func (m *Model) refusal(now time.Time, retryAfter time.Duration, closed bool) (quota.Report, bool) {
	if retryAfter <= 0 {
		if m.limit == 0 {
			return quota.Report{}, false // a bare 429 is the probe's to read
		}
		retryAfter = time.Second // the shortest a Retry-After says
	}
	end := now.Add(retryAfter)
	if m.refused.IsZero() {
		m.refused, m.before = now, m.total
	}
	if closed {
		// In flight when the window ran out: the earliest end is the tightest.
		if end.Before(m.stated) {
			m.stated = end
		}
		m.reset = m.stated
		return m.quota(now)
	}
	if m.limit == 0 && m.ok == 0 {
		return quota.Report{}, false // spent by others before we learned anything
	}
	if m.limit > 0 && m.ok < m.limit {
		m.surprises++ // a fixed window refuses early only while its length is learnt
	}
	// A predicted window that refuses early is the old one still: the
	// prediction was early, not the limit wrong. Any other window that held
	// less than half the last is a misfit: the server frees its quota as it
	// goes, or others now spend it.
	early := m.predicted && m.ok < m.limit/2
	misfit := !early && m.limit > 0 && m.ok > 0 && m.ok < m.limit/2
	if misfit || m.surprises >= maxSurprises && m.surprises*4 > m.windows {
		m.off = true
		return quota.Report{}, false
	}
	m.windows++
	m.whole = retryAfter%time.Second == 0
	// The window closed measured the limit and confirmed the last, unless it
	// ended a prediction early.
	m.measured = !early && m.ok > 0
	if m.measured {
		m.confirmed = m.confirmed || m.limit > 0
		m.limit = m.ok
	}
	if m.stated.IsZero() {
		// The first end, late by a Retry-After's rounding, of a window begun by
		// the first request. The guess errs short: a look too early costs one
		// refusal and teaches the length; one too late costs time every window.
		m.guess = end.Sub(m.start)
		if m.whole {
			m.guess -= time.Second
		}
		m.guess = max(m.guess, end.Sub(m.start)/2)
	} else {
		m.learnWindow(end.Sub(m.stated), early, m.windows-1-m.statedAt)
	}
	m.stated, m.reset, m.ok, m.predicted = end, end, 0, false
	m.statedAt = m.windows
	return m.quota(now)
}

// learnWindow takes d > 0, the time between two stated ends: k windows of
// the length known (or guessed) that passed with no refusal, or a new
// length. early: the second end ended a prediction early; begun: the windows
// seen begin since the first end, the refused one included.
func (m *Model) learnWindow(d time.Duration, early bool, begun int) {
	if base := cmp.Or(m.window, m.guess); base > 0 {
		k := max(math.Round(float64(d)/float64(base)), 1)
		if early && m.window == 0 {
			// A guess shown short: d spans at most the windows seen before.
			k = max(min(k, float64(begun-1)), 1)
		}
		d /= time.Duration(k)
	}
	switch {
	case m.whole && d >= 2*time.Second:
		d = d.Round(time.Second)
	case m.whole && d > time.Second:
		// Whole-second ends, each up to a second late, of a one-second
		// window: one learnt longer holds back up to half of every window.
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

// advance moves the current window on when its end has passed, by the
// learnt length or, until it is learnt, by the guess.
func (m *Model) advance(now time.Time) {
	if m.reset.IsZero() || now.Before(m.reset) {
		return
	}
	step := cmp.Or(m.window, m.guess)
	if step <= 0 {
		m.reset = time.Time{}
		return
	}
	// Half the limit or more, and no refusal: a fixed window.
	m.confirmed = m.confirmed || m.limit > 0 && m.ok >= m.limit/2
	n := now.Sub(m.reset)/step + 1
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

// Capacity is what the server admitted per second over span, for the probe
// when the model gives up. Within twice the first window's time of the first
// refusal, the server refills as it goes: what it admitted since is its
// refill, the first window a bucket's saved-up burst. Later, the whole
// history since the first response spans about a window.
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
