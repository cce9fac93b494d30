// Package ratespec is a conformance suite for token buckets with
// golang.org/x/time/rate's API: scenarios of calls at given times, each with
// the figures x/time/rate returns for them and, where pacer's Bucket answers
// differently on purpose, pacer's figures and the documented difference.
//
// The root package runs the suite against pacer.Bucket
// (bucket_conformance_test.go); the bench module, which may depend on
// x/time/rate, runs it against rate.Limiter (bench/conformance_test.go), so
// every figure said to be x/time/rate's is checked against x/time/rate itself.
// The scenarios are written for this suite; they cover what x/time/rate's own
// tests check (bursts, stale times, SetLimit and SetBurst with outstanding
// reservations, cancel ordering, tiny, zero and infinite limits, burst 0,
// n > burst) without copying them.
package ratespec

import (
	"fmt"
	"math"
	"time"
)

// Limiter is the part of x/time/rate's API the suite drives, with time passed
// explicitly (x/time/rate's AllowN(t, n) is pacer's AllowNAt(t, n), and so on).
type Limiter interface {
	AllowN(t time.Time, n int) bool
	ReserveN(t time.Time, n int) Reservation
	TokensAt(t time.Time) float64
	SetLimitAt(t time.Time, limit float64)
	SetBurstAt(t time.Time, burst int)
}

// Reservation is the part of a reservation the suite drives.
type Reservation interface {
	OK() bool
	DelayFrom(t time.Time) time.Duration
	CancelAt(t time.Time)
}

// Inf is the infinite limit of both libraries (math.MaxFloat64).
const Inf = math.MaxFloat64

// T0 is the scenarios' time origin; step times are offsets from it.
var T0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Op is what a step does.
type Op int

// The steps a scenario is made of. Each reports one figure (see Run).
const (
	Allow    Op = iota // AllowN(At, N): "true" or "false"
	Reserve            // ReserveN(At, N): "ok <delay>" or "not ok"; the reservation is numbered in order from 0
	Cancel             // reservation number N .CancelAt(At): ""
	Tokens             // TokensAt(At): the tokens, to 3 decimals
	SetLimit           // SetLimitAt(At, Limit): ""
	SetBurst           // SetBurstAt(At, N): ""
)

// Step is one call of a scenario.
type Step struct {
	At    time.Duration // since T0
	Op    Op
	N     int     // tokens (Allow, Reserve), reservation number (Cancel), burst (SetBurst)
	Limit float64 // SetLimit
}

// Case is a scenario: a limiter, the calls made on it, and the figures.
type Case struct {
	Name  string
	Limit float64
	Burst int
	Steps []Step
	// Want is what x/time/rate reports, one figure per step.
	Want []string
	// Pacer overrides Want where pacer's Bucket answers differently on
	// purpose: step index to pacer's figure. Doc then names the
	// difference, in words that the Bucket's doc comment uses.
	Pacer map[int]string
	Doc   string
}

// Run makes c's calls on l and returns the figure each reports. Delays are
// rounded to the microsecond, tokens to 3 decimals: the suite compares
// semantics, not floating-point residue (x/time/rate computes in float64
// seconds, pacer in whole nanoseconds rounded up).
func Run(l Limiter, c Case) []string {
	var rs []Reservation
	out := make([]string, len(c.Steps))
	for i, s := range c.Steps {
		t := T0.Add(s.At)
		switch s.Op {
		case Allow:
			out[i] = fmt.Sprint(l.AllowN(t, s.N))
		case Reserve:
			r := l.ReserveN(t, s.N)
			rs = append(rs, r)
			if r.OK() {
				out[i] = "ok " + r.DelayFrom(t).Round(time.Microsecond).String()
			} else {
				out[i] = "not ok"
			}
		case Cancel:
			rs[s.N].CancelAt(t)
		case Tokens:
			out[i] = fmt.Sprintf("%.3f", l.TokensAt(t))
		case SetLimit:
			l.SetLimitAt(t, s.Limit)
		case SetBurst:
			l.SetBurstAt(t, s.N)
		}
	}
	return out
}

// Expected returns the figures c's steps must report: Want, with pacer's own
// figures in place where pacer differs.
func (c Case) Expected(pacer bool) []string {
	want := append([]string(nil), c.Want...)
	if pacer {
		for i, v := range c.Pacer {
			want[i] = v
		}
	}
	return want
}

const ms = time.Millisecond

// Cases is the suite.
var Cases = []Case{
	{
		Name: "a full bucket grants its burst, then paces at the limit", Limit: 10, Burst: 3,
		Steps: []Step{
			{0, Allow, 2, 0}, {0, Allow, 1, 0}, {0, Allow, 1, 0}, {0, Tokens, 0, 0},
			{50 * ms, Tokens, 0, 0}, {99 * ms, Allow, 1, 0}, {100 * ms, Allow, 1, 0},
			{100 * ms, Allow, 1, 0}, {time.Second, Tokens, 0, 0}, {time.Second, Allow, 3, 0},
		},
		Want: []string{"true", "true", "false", "0.000", "0.500", "false", "true", "false", "3.000", "true"},
	},
	{
		Name: "n > burst is never allowed, and takes nothing", Limit: 10, Burst: 2,
		Steps: []Step{
			{0, Allow, 3, 0}, {0, Reserve, 3, 0}, {0, Cancel, 0, 0}, {0, Tokens, 0, 0},
			{0, Allow, 2, 0}, {time.Hour, Allow, 3, 0},
		},
		Want: []string{"false", "not ok", "", "2.000", "true", "false"},
	},
	{
		Name: "n = 0 is allowed, even from an empty bucket, and takes nothing", Limit: 10, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Allow, 0, 0}, {0, Reserve, 0, 0}, {50 * ms, Tokens, 0, 0},
		},
		Want: []string{"true", "true", "ok 0s", "0.500"},
	},
	{
		Name: "n < 0 is never allowed", Limit: 10, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Allow, -1, 0}, {0, Tokens, 0, 0}, {0, Allow, 1, 0},
		},
		// x/time/rate reports true for n = -1 and adds a token: the
		// bucket then holds one more than it was refilled with.
		Want:  []string{"true", "true", "1.000", "true"},
		Pacer: map[int]string{1: "false", 2: "0.000", 3: "false"},
		Doc:   "n < 0 is never allowed",
	},
	{
		Name: "burst 0 allows nothing but n = 0", Limit: 10, Burst: 0,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Reserve, 1, 0}, {0, Allow, 0, 0}, {time.Hour, Tokens, 0, 0},
		},
		Want: []string{"false", "not ok", "true", "0.000"},
	},
	{
		Name: "limit 0: the burst, then nothing; a SetLimit refills from empty", Limit: 0, Burst: 2,
		Steps: []Step{
			{0, Allow, 1, 0}, {time.Hour, Allow, 1, 0}, {time.Hour, Allow, 1, 0},
			{time.Hour, Tokens, 0, 0}, {time.Hour, SetLimit, 0, 10}, {time.Hour, Reserve, 1, 0},
		},
		Want: []string{"true", "true", "false", "0.000", "", "ok 100ms"},
	},
	{
		Name: "limit 0: a reservation beyond the tokens left", Limit: 0, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Reserve, 1, 0}, {0, Allow, 1, 0},
		},
		// x/time/rate says OK with an infinite delay (InfDuration, which
		// Round leaves as is) and still takes the token (golang/go #47221).
		Want:  []string{"true", "ok 2562047h47m16.854775807s", "false"},
		Pacer: map[int]string{1: "not ok"},
		Doc:   "Reserve says not OK",
	},
	{
		Name: "limit Inf allows everything, whatever the burst", Limit: Inf, Burst: 0,
		Steps: []Step{
			{0, Allow, 1000, 0}, {0, Reserve, 1 << 20, 0}, {0, Cancel, 0, 0}, {0, Tokens, 0, 0},
			{0, SetLimit, 0, 10}, {0, Allow, 1, 0},
		},
		// x/time/rate reports the burst as the tokens of an unlimited
		// limiter; pacer reports +Inf: any n is allowed.
		Want:  []string{"true", "ok 0s", "", "0.000", "", "false"},
		Pacer: map[int]string{3: "+Inf"},
		Doc:   "+Inf when the limit is Inf",
	},
	{
		Name: "leaving Inf: the bucket is full at the new limit", Limit: Inf, Burst: 2,
		Steps: []Step{
			{0, Allow, 1000, 0}, {0, SetLimit, 0, 10}, {0, Tokens, 0, 0}, {0, Allow, 2, 0}, {0, Allow, 1, 0},
		},
		Want: []string{"true", "", "2.000", "true", "false"},
	},
	{
		Name: "Every(1h): one an hour, to the nanosecond", Limit: 1.0 / 3600, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {30 * time.Minute, Tokens, 0, 0}, {time.Hour - time.Second, Allow, 1, 0},
			{time.Hour, Allow, 1, 0}, {time.Hour, Reserve, 1, 0}, {90 * time.Minute, Cancel, 0, 0},
			{90 * time.Minute, Tokens, 0, 0},
		},
		Want: []string{"true", "0.500", "false", "true", "ok 1h0m0s", "", "0.500"},
	},
	{
		Name: "a limit so small the next token is centuries away", Limit: 1e-10, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Allow, 1, 0}, {24 * time.Hour, Reserve, 1, 0},
		},
		// x/time/rate says OK with an infinite delay; pacer treats a grant
		// more than 73 years away as never.
		Want:  []string{"true", "false", "ok 2562047h47m16.854775807s"},
		Pacer: map[int]string{2: "not ok"},
		Doc:   "a grant further away than that is treated as never",
	},
	{
		Name: "stale times: a call with an earlier time after a later one", Limit: 10, Burst: 2,
		Steps: []Step{
			{time.Second, Allow, 1, 0}, {0, Tokens, 0, 0}, {0, Allow, 1, 0},
			{time.Second, Allow, 1, 0}, {time.Second, Allow, 1, 0}, {time.Second, Tokens, 0, 0},
		},
		// x/time/rate answers the earlier time from its tokens as of the
		// latest call (1 left), grants at 0s, and moves its clock back to
		// 0s; at 1s it refills the second it had already counted, and
		// grants twice more: three tokens at the same instant from a
		// bucket of 2 (golang/go #65508, #71360). pacer sees at 0s the
		// bucket the 1s grant left, moved back in time: empty. At 1s it
		// grants the one token left.
		Want:  []string{"true", "1.000", "true", "true", "true", "0.000"},
		Pacer: map[int]string{1: "0.000", 2: "false", 4: "false"},
		Doc:   "never more than it could grant",
	},
	{
		Name: "stale times: far in the past after a grant", Limit: 10, Burst: 3,
		Steps: []Step{
			{time.Second, Allow, 3, 0}, {0, Tokens, 0, 0}, {0, Allow, 1, 0}, {time.Second, Tokens, 0, 0},
		},
		Want: []string{"true", "0.000", "false", "0.000"},
	},
	{
		Name: "SetLimit keeps the tokens and refills at the new rate", Limit: 10, Burst: 10,
		Steps: []Step{
			{0, Allow, 6, 0}, {0, SetLimit, 0, 100}, {0, Tokens, 0, 0}, {10 * ms, Tokens, 0, 0},
			{20 * ms, SetLimit, 0, 1}, {1020 * ms, Tokens, 0, 0},
		},
		Want: []string{"true", "", "4.000", "5.000", "", "7.000"},
	},
	{
		Name: "SetBurst keeps the tokens, capped at the new burst", Limit: 10, Burst: 5,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, SetBurst, 2, 0}, {0, Tokens, 0, 0}, {0, Allow, 3, 0},
			{0, SetBurst, 4, 0}, {0, Tokens, 0, 0}, {time.Second, Tokens, 0, 0},
		},
		Want: []string{"true", "", "2.000", "false", "", "2.000", "4.000"},
	},
	{
		Name: "SetLimit faster with a reservation outstanding", Limit: 5, Burst: 2,
		Steps: []Step{
			{0, Allow, 2, 0}, {0, Reserve, 2, 0}, {200 * ms, SetLimit, 0, 10}, {200 * ms, Reserve, 1, 0},
		},
		// The reservation keeps its time (400ms) in both. x/time/rate
		// grants the next token at 400ms too: three tokens at 400ms from
		// a bucket of 2. pacer grants it when the bucket, refilled at the
		// new rate and emptied by the reservation at 400ms, has it: 500ms.
		Want:  []string{"true", "ok 400ms", "", "ok 200ms"},
		Pacer: map[int]string{3: "ok 300ms"},
		Doc:   "respect the new limit",
	},
	{
		Name: "SetLimit slower with a reservation outstanding", Limit: 10, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Reserve, 1, 0}, {50 * ms, SetLimit, 0, 1}, {50 * ms, Reserve, 1, 0},
		},
		// Both keep the level at 50ms (half a token) and the reservation's
		// time; the reservation leaves the bucket half a token in debt,
		// refilled at 1/s: the next token at 1.55s.
		Want: []string{"true", "ok 100ms", "", "ok 1.5s"},
	},
	{
		Name: "SetBurst larger with a reservation outstanding", Limit: 5, Burst: 2,
		Steps: []Step{
			{0, Allow, 2, 0}, {0, Reserve, 2, 0}, {300 * ms, SetBurst, 4, 0}, {300 * ms, Reserve, 4, 0},
		},
		Want: []string{"true", "ok 400ms", "", "ok 900ms"},
	},
	{
		Name: "cancel the last reservation: everything back", Limit: 10, Burst: 2,
		Steps: []Step{
			{0, Allow, 2, 0}, {0, Reserve, 2, 0}, {50 * ms, Cancel, 0, 0}, {50 * ms, Reserve, 2, 0},
		},
		Want: []string{"true", "ok 200ms", "", "ok 150ms"},
	},
	{
		Name: "cancel after the reservation's time: nothing back", Limit: 10, Burst: 2,
		Steps: []Step{
			{0, Allow, 2, 0}, {0, Reserve, 2, 0}, {250 * ms, Cancel, 0, 0}, {250 * ms, Reserve, 2, 0},
		},
		Want: []string{"true", "ok 200ms", "", "ok 150ms"},
	},
	{
		Name: "cancel at exactly the reservation's time: everything back", Limit: 10, Burst: 2,
		Steps: []Step{
			{0, Allow, 2, 0}, {0, Reserve, 2, 0}, {200 * ms, Cancel, 0, 0}, {200 * ms, Reserve, 2, 0},
		},
		Want: []string{"true", "ok 200ms", "", "ok 0s"},
	},
	{
		Name: "cancel a reservation granted at once, after another grant at that instant", Limit: 10, Burst: 2,
		Steps: []Step{
			{0, Reserve, 1, 0}, {0, Allow, 1, 0}, {0, Cancel, 0, 0}, {0, Allow, 1, 0}, {0, Allow, 1, 0},
		},
		Want: []string{"ok 0s", "true", "", "true", "false"},
	},
	{
		Name: "cancel one a later reservation depends on, at burst 1: nothing usable back", Limit: 10, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Reserve, 1, 0}, {0, Reserve, 1, 0}, {0, Cancel, 0, 0},
			{0, Reserve, 1, 0}, {150 * ms, Allow, 1, 0},
		},
		Want: []string{"true", "ok 100ms", "ok 200ms", "", "ok 300ms", "false"},
	},
	{
		Name: "cancel one a later reservation depends on, at burst 3", Limit: 10, Burst: 3,
		Steps: []Step{
			{0, Allow, 3, 0}, {0, Reserve, 2, 0}, {0, Reserve, 1, 0}, {0, Cancel, 0, 0},
			{300 * ms, Tokens, 0, 0}, {300 * ms, Allow, 2, 0},
		},
		// Without the cancelled reservation the bucket refills from empty
		// at t0 and the later one takes 1 of the 3 there by 300ms: 2 left.
		// x/time/rate gives back 2 minus every token reserved after it
		// counted from its time: 1, so only 1 is left at 300ms.
		Want:  []string{"true", "ok 200ms", "ok 300ms", "", "1.000", "false"},
		Pacer: map[int]string{4: "2.000", 5: "true"},
		Doc:   "as if the reservation had never been made",
	},
	{
		Name: "cancel order: the earlier first", Limit: 10, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Reserve, 1, 0}, {0, Reserve, 1, 0}, {0, Cancel, 0, 0},
			{0, Cancel, 1, 0}, {0, Reserve, 1, 0},
		},
		// Both cancelled: the bucket as drained at t0, next token at
		// 100ms. x/time/rate gives back nothing for the first (the second
		// depends on it) and, for the second, only its own token: 200ms.
		Want:  []string{"true", "ok 100ms", "ok 200ms", "", "", "ok 200ms"},
		Pacer: map[int]string{5: "ok 100ms"},
		Doc:   "the order of several cancels does not matter",
	},
	{
		Name: "cancel order: the later first", Limit: 10, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Reserve, 1, 0}, {0, Reserve, 1, 0}, {0, Cancel, 1, 0},
			{0, Cancel, 0, 0}, {0, Reserve, 1, 0},
		},
		Want: []string{"true", "ok 100ms", "ok 200ms", "", "", "ok 100ms"},
	},
	{
		Name: "cancel after a SetLimit: the room the faster limit made comes back", Limit: 1, Burst: 1,
		Steps: []Step{
			{0, Allow, 1, 0}, {0, Reserve, 1, 0}, {0, SetLimit, 0, 1000}, {0, Cancel, 0, 0}, {0, Reserve, 1, 0},
		},
		Want: []string{"true", "ok 1s", "", "", "ok 1ms"},
	},
	{
		Name: "Allow cannot take tokens set aside for a reservation", Limit: 10, Burst: 2,
		Steps: []Step{
			{0, Allow, 2, 0}, {0, Reserve, 2, 0}, {100 * ms, Allow, 1, 0}, {200 * ms, Allow, 1, 0},
			{300 * ms, Allow, 1, 0},
		},
		Want: []string{"true", "ok 200ms", "false", "false", "true"},
	},
}
