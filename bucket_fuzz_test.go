package pacer

import (
	"math"
	"slices"
	"testing"
	"time"
)

// fuzzOps reads the fuzzer's bytes as a program; past the end it reads
// zeros.
type fuzzOps struct{ data []byte }

func (o *fuzzOps) next() int {
	if len(o.data) == 0 {
		return 0
	}
	b := o.data[0]
	o.data = o.data[1:]
	return int(b)
}

var (
	fuzzLimits = []Limit{0, 1e-9, 0.3, 1, 3, 7, 10, 100, 333.3, 1000, 1e6, Every(3 * time.Millisecond), Inf}
	fuzzBursts = []int{0, 1, 2, 3, 5, 10, 100, 1000}
	fuzzUnits  = []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, 10 * time.Millisecond,
		100 * time.Millisecond, time.Second, time.Hour}
)

func (o *fuzzOps) limit() Limit { return fuzzLimits[o.next()%len(fuzzLimits)] }
func (o *fuzzOps) burst() int   { return fuzzBursts[o.next()%len(fuzzBursts)] }
func (o *fuzzOps) duration() time.Duration {
	return time.Duration(o.next()%16) * fuzzUnits[o.next()%len(fuzzUnits)]
}
func (o *fuzzOps) n() int {
	switch b := o.next(); b {
	case 255:
		return math.MaxInt
	case 254:
		return -1
	default:
		return b % 12
	}
}

// FuzzBucket runs random sequences of AllowN, ReserveN, Cancel, SetLimit,
// SetBurst, PauseUntil and clock steps (forward, and backward: calls with
// stale times) on the pure core with a synthetic clock, and checks that
//
//   - in any window of length w, the tokens granted are at most
//     maxBurst + maxLimit·w (plus the nanosecond rounding of each grant and
//     of each parameter change), where the maxima are over the run since the
//     limit was last Inf;
//   - Tokens is never negative or NaN and never above the burst;
//   - reservations say OK with a finite delay, or not OK with InfDuration,
//     and an OK one asked for at the latest time the bucket has seen acts
//     no earlier than any made before it.
func FuzzBucket(f *testing.F) {
	f.Add([]byte{3, 2, 1, 1, 1, 1, 1, 1, 0, 5, 2, 1, 1})
	f.Add([]byte{9, 5, 2, 3, 2, 3, 3, 0, 4, 6, 0, 7, 3, 2, 1, 1, 0, 2, 2})
	f.Add([]byte{7, 4, 2, 5, 2, 5, 4, 10, 0, 1, 5, 5, 1, 3, 2, 1, 1})
	f.Add([]byte{12, 3, 1, 7, 6, 0, 7, 4, 3, 4, 7, 2, 1, 0, 9, 5, 1, 1})
	f.Add([]byte{0, 4, 1, 2, 1, 2, 1, 2, 4, 5, 0, 15, 6, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		ops := &fuzzOps{data: data}
		limit, burst := ops.limit(), ops.burst()
		b := NewBucket(limit, burst)
		now := t0
		latest := now // the latest time any call was made at

		type grant struct {
			at time.Time
			n  int
		}
		var grants []grant
		type held struct {
			r      *Reservation
			n      int
			at     time.Time
			gi     int // index in grants
			cancel bool
		}
		var order []*held // every OK reservation, in order
		maxLimit, maxBurst := limit, burst
		changes := 0
		reset := func() { // the limit became or stopped being Inf: start over
			grants = nil
			for _, h := range order {
				h.gi = -1
			}
			maxLimit, maxBurst = b.Limit(), b.Burst()
		}
		for steps := 0; len(ops.data) > 0 && steps < 400; steps++ {
			if now.After(latest) {
				latest = now
			}
			switch ops.next() % 9 {
			case 0:
				now = now.Add(ops.duration())
			case 8:
				now = now.Add(-ops.duration())
			case 1:
				n := ops.n()
				if b.AllowNAt(now, n) && n > 0 && b.Limit() != Inf {
					grants = append(grants, grant{now, n})
				}
			case 2:
				n := ops.n()
				r := b.ReserveNAt(now, n)
				d := r.DelayFrom(now)
				if !r.OK() {
					if d != InfDuration {
						t.Fatalf("not OK reservation with delay %v", d)
					}
					continue
				}
				if d < 0 || d >= InfDuration {
					t.Fatalf("OK reservation with delay %v", d)
				}
				actAt := now.Add(d)
				if n == 0 { // takes nothing, waits for nothing
					continue
				}
				for _, h := range order {
					if !h.cancel && now.Equal(latest) && actAt.Before(h.at) {
						t.Fatalf("reservation acts at %v, before an earlier one at %v", actAt.Sub(t0), h.at.Sub(t0))
					}
				}
				h := &held{r: r, n: n, at: actAt, gi: -1}
				order = append(order, h)
				if b.Limit() != Inf {
					grants = append(grants, grant{actAt, n})
					h.gi = len(grants) - 1
				}
			case 3:
				if len(order) == 0 {
					continue
				}
				h := order[ops.next()%len(order)]
				h.r.CancelAt(now)
				if !h.cancel && !now.After(h.at) {
					h.cancel = true
					if h.gi >= 0 {
						grants[h.gi].n = 0 // the holder does not act
					}
				}
			case 4:
				wasInf := b.Limit() == Inf
				b.SetLimitAt(now, ops.limit())
				changes++
				if wasInf || b.Limit() == Inf {
					reset()
				}
				maxLimit = max(maxLimit, b.Limit())
			case 5:
				b.SetBurstAt(now, ops.burst())
				changes++
				maxBurst = max(maxBurst, b.Burst())
			case 6:
				until := now.Add(ops.duration())
				b.pauseAt(clockOf(now), clockOf(until))
			case 7:
				tok := b.TokensAt(now)
				if math.IsNaN(tok) || tok < 0 {
					t.Fatalf("Tokens = %v", tok)
				}
				if b.Limit() != Inf && tok > float64(b.Burst()) {
					t.Fatalf("Tokens = %v > burst %d", tok, b.Burst())
				}
			}
		}
		if maxLimit == Inf {
			return
		}
		slices.SortStableFunc(grants, func(x, y grant) int { return x.at.Compare(y.at) })
		// Rounding: each grant costs its tokens' time rounded up, so rounding
		// never adds tokens within fixed parameters; a full bucket may hold
		// up to burst·(step/interval) tokens, and each change of parameters
		// may convert a level with that much slack.
		slack := float64(maxBurst)*float64(maxLimit)*1e-9 + 1e-9
		for i := range grants {
			sum := 0
			for j := i; j < len(grants); j++ {
				sum += grants[j].n
				w := grants[j].at.Sub(grants[i].at).Seconds()
				extra := float64(changes+1) * slack
				bound := float64(maxBurst) + float64(maxLimit)*w + extra
				if float64(sum) > bound*(1+1e-12) {
					t.Fatalf("granted %d tokens in %v (from %v), bound %.12f (limit ≤ %v, burst ≤ %d)",
						sum, grants[j].at.Sub(grants[i].at), grants[i].at.Sub(t0), bound, maxLimit, maxBurst)
				}
			}
		}
	})
}
