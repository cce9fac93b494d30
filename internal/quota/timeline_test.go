package quota

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A timeline is what happens to one Window, at written-out times from t0:
// requests admitted (charged), responses observed, the owner's Advance. The
// tests of Observe, Advance and Charge replay one and then read the state.

// t0 is the instant every timeline is written from.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// horizon is the Seen.Horizon of a limiter with a 10 ms round trip.
const horizon = 20 * time.Millisecond

var inf = math.Inf(1)

// event happens at t0+at: first charge whole requests are admitted (a
// request's Amount each, so a token quota takes cost 1), then the report
// is observed with seen, or, with advance, the window is advanced with
// unit and seen's Unseen and Admitted.
type event struct {
	at      time.Duration
	charge  int
	report  *Report
	seen    Seen
	advance bool
	unit    float64
}

// obs is a response's report arriving at t0+at, after charge requests of
// ours were admitted since the last event.
func obs(at time.Duration, charge int, q Report, seen Seen) event {
	if seen.Horizon == 0 {
		seen.Horizon = horizon
	}
	return event{at: at, charge: charge, report: &q, seen: seen}
}

// adv is the owner advancing the window at t0+at with requests of one unit.
func adv(at time.Duration, seen Seen) event {
	return event{at: at, advance: true, unit: 1, seen: seen}
}

// reset is t0+d, for a Report's Reset.
func reset(d time.Duration) time.Time { return t0.Add(d) }

// replay runs the events on w and returns the last Advance's result.
func replay(t *testing.T, w *State, events []event) (st Step, ok bool) {
	t.Helper()
	for _, e := range events {
		now := t0.Add(e.at)
		for range e.charge {
			require.True(t, w.charge(w.amount(1), now, 0, 0), "admission at %v", e.at)
		}
		switch {
		case e.report != nil:
			w.Observe(*e.report, now, e.seen)
		case e.advance:
			st, ok = w.Advance(now, e.seen.Unseen, e.unit)
		}
	}
	return st, ok
}

// last is the time of the last event.
func last(events []event) time.Time { return t0.Add(events[len(events)-1].at) }

// rateEqual asserts a rate, +Inf included.
func rateEqual(t *testing.T, want, got float64, msg string) {
	t.Helper()
	if math.IsInf(want, 1) {
		assert.True(t, math.IsInf(got, 1), "%s: got %v, want +Inf", msg, got)
		return
	}
	assert.InDelta(t, want, got, 1e-6, msg)
}

// requests is a request quota as the limiter configures it by default, with
// a MaxDelay of a minute.
func requests() *State {
	return New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Minute})
}

// tokenQuota is a token quota as the limiter configures it by default.
func tokenQuota() *State {
	return New(Config{Name: "tokens", Tokens: true, Safety: 0.9, MaxDelay: time.Minute})
}
