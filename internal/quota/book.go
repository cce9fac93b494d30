package quota

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Book is every quota of one endpoint: the Windows its responses describe,
// followed by name. A request is charged to every known quota it counts
// against (1 to each request quota, its cost to each token quota) and goes
// only if every one of them affords it.
//
// A Book is not safe for concurrent use: its owner holds one lock across
// each call, and reads what admission needs from the value its last Plan
// returned.
type Book struct {
	cfg     BookConfig
	windows []*Window
	charged []*Window // the known windows, as of the last Plan
	plan    Plan      // the last Plan's
}

// BookConfig configures a Book.
type BookConfig struct {
	// Safety and MaxDelay are every Window's (see Config).
	Safety   float64
	MaxDelay time.Duration
	// Horizon bounds how far away a stated reset is believed; a later one
	// is taken as Horizon from now.
	Horizon time.Duration
	// Fleet marks an endpoint whose quotas a fleet of limiters spends
	// together through a shared store: every quota is spread from the
	// start, and no drift is measured (the others' spending is the
	// store's to hold, not each member's to deduct).
	Fleet bool
	// Coordinated marks an endpoint whose quotas a fleet spends together
	// under a budget a shared store keeps: each member spends at once what
	// the fleet's budget affords, and what the others spend is not read as
	// unseen clients' spending (Config.Coordinated).
	Coordinated bool
	// Inferred names the quota the owner infers from its own answers (a
	// server that states none); see Config.Inferred. Not with Fleet.
	Inferred string
	// Epoch is every Window's (see Config).
	Epoch time.Time
}

// MaxQuotas caps the quotas tracked per endpoint (ParseHeaders keeps 16).
// Reports of further quotas are ignored.
const MaxQuotas = 16

// NewBook returns a Book that knows no quota yet.
func NewBook(c BookConfig) *Book { return &Book{cfg: c} }

// Named is what a response said of one quota, by name.
type Named struct {
	Name   string
	Tokens bool // counted in tokens (see Config.Tokens)
	Report
}

// Counts is what the owner has admitted, in requests and in stated
// tokens: in flight (admitted, not yet answered) and ever. Blind requests
// (no stated cost) are counted apart, and each token quota prices them at
// what it learnt they cost.
type Counts struct {
	Inflight, InflightCost float64
	Admitted, AdmittedCost float64
	Blind, BlindInflight   float64
}

func (c Counts) unseen(w *Window) float64 {
	if w.tokens {
		return c.InflightCost + c.BlindInflight*w.Estimate()
	}
	return c.Inflight
}

func (c Counts) admitted(w *Window) float64 {
	if w.tokens {
		return c.AdmittedCost + float64(w.blindCharged)/Milli
	}
	return c.Admitted
}

// Observe folds in what one response said of its quotas, at now. c counts
// what is in flight besides the response's own request (with what feeding
// limiters have in flight); seen carries the rest (Observe sets its Unseen,
// Admitted, Blind, BlindUnseen and Stated per quota from c). Both are
// passed by pointer (see Window.observeAt). It reports whether a quota the response described is
// spent (nothing left before a stated reset).
//
// Reports the model cannot use are dropped: counts that are not finite or
// are negative (but for an Unstated Remaining), and quotas beyond
// MaxQuotas. Remaining is clamped to Limit, the reset to Horizon. A quota
// that rolled over blind (a look is due) and that this response did not
// describe is forgotten: the server stopped speaking of it.
func (b *Book) Observe(rs []Named, now time.Time, c *Counts, seen *Seen) (spent bool) {
	var mentioned uint64 // bit i: b.windows[i] was described (MaxQuotas ≤ 64)
	for k := range rs {
		// By pointer, each step (see observeAt).
		r := &rs[k]
		var q Report
		if !b.sane(r, now, &q) {
			continue
		}
		i, w := b.window(r.Name, r.Tokens)
		mentioned |= 1 << i
		seen.Unseen, seen.Admitted = c.unseen(w), c.admitted(w)
		seen.Blind, seen.BlindUnseen, seen.Stated = c.Blind, c.BlindInflight, c.AdmittedCost-c.InflightCost
		w.observeAt(&q, now, seen)
		if b.cfg.Fleet {
			w.ForgetDrift()
		}
		if q.Remaining != Unstated && q.Remaining < 1 && !q.Reset.IsZero() {
			spent = true
		}
	}
	if b.anyForgotten(mentioned) {
		i := 0
		b.windows = slices.DeleteFunc(b.windows, func(w *Window) bool {
			drop := b.forgotten(w, i, mentioned)
			if drop {
				// Nor is a request charged to it until the next Plan.
				b.charged = slices.DeleteFunc(b.charged, func(c *Window) bool { return c == w })
			}
			i++
			return drop
		})
	}
	return spent
}

// forgotten reports whether Observe forgets w, b.windows[i], after a
// response that described the windows of the bit set mentioned: one that
// rolled over blind and that the response did not describe.
func (b *Book) forgotten(w *Window, i int, mentioned uint64) bool {
	return w.probing && w.rolled && mentioned&(1<<i) == 0
}

// anyForgotten reports whether Observe forgets a window (forgotten): only
// then does it rewrite the lists, which was 5% of observing a response.
func (b *Book) anyForgotten(mentioned uint64) bool {
	for i, w := range b.windows {
		if b.forgotten(w, i, mentioned) {
			return true
		}
	}
	return false
}

// sane sets q to r's report, clamped (see Observe), and reports whether
// it is one the model can use.
func (b *Book) sane(r *Named, now time.Time, q *Report) bool {
	*q = r.Report
	finite := func(v float64) bool { return v >= 0 && !math.IsInf(v, 1) } // false for NaN
	if !finite(q.Remaining) && q.Remaining != Unstated || !finite(q.Limit) || len(b.windows) >= MaxQuotas && b.Find(r.Name) == nil {
		return false
	}
	if q.Limit > 0 {
		q.Remaining = min(q.Remaining, q.Limit)
	}
	q.Window = max(q.Window, 0)
	if !q.Reset.IsZero() && q.Reset.Sub(now) > b.cfg.Horizon {
		q.Reset = now.Add(b.cfg.Horizon)
	}
	return true
}

// Find returns the named quota's Window, or nil.
func (b *Book) Find(name string) *Window {
	for _, w := range b.windows {
		if w.name == name {
			return w
		}
	}
	return nil
}

// window returns the named quota's Window and its index, creating it.
func (b *Book) window(name string, tokens bool) (int, *Window) {
	for i, w := range b.windows {
		if w.name == name {
			return i, w
		}
	}
	w := New(Config{
		Name: name, Tokens: tokens, Safety: b.cfg.Safety, MaxDelay: b.cfg.MaxDelay,
		Shared:      b.cfg.Fleet,
		Coordinated: b.cfg.Coordinated,
		Inferred:    name == b.cfg.Inferred && !b.cfg.Fleet && !b.cfg.Coordinated,
		Epoch:       b.cfg.Epoch,
	})
	b.windows = append(b.windows, w)
	return len(b.windows) - 1, w
}

// Drop forgets the quotas for which drop reports true.
func (b *Book) Drop(drop func(*Window) bool) {
	b.windows = slices.DeleteFunc(b.windows, drop)
	b.charged = slices.DeleteFunc(b.charged, drop)
}

// Charged is the known quotas, as of the last Plan: those a request is
// charged to. The slice is the book's: read it under the owner's lock.
func (b *Book) Charged() []*Window { return b.charged }

// Windows returns every quota the book follows, known or not; the slice is
// the book's, valid until its next call.
func (b *Book) Windows() []*Window { return b.windows }

// Len is how many quotas the book follows.
func (b *Book) Len() int { return len(b.windows) }

// Known reports whether a response has described a quota the budget
// speaks for.
func (b *Book) Known() bool {
	for _, w := range b.windows {
		if w.known {
			return true
		}
	}
	return false
}

// Plan is where Book.Plan left the endpoint's quotas.
type Plan struct {
	// ReqRate and TokRate are the rates the request and token quotas may
	// be spent at (+Inf: the budgets are the gate); ReqBudget and
	// TokBudget what their tightest budget holds above its reserve
	// (+Inf with none).
	ReqRate, ReqBudget float64
	TokRate, TokBudget float64
	// ReqAtOnce and TokAtOnce are what the quota setting the rate lets
	// go at once beside it, in units (see Step.AtOnce); zero: a burst at
	// the rate is a small part of its budget.
	ReqAtOnce, TokAtOnce float64
	// Known is how many quotas are known; Blind reports that one is being
	// looked at (one request in flight learns it).
	Known int
	Blind bool
	// Tokens reports that a known quota is counted in tokens.
	Tokens bool
	// Next is when the quotas must be looked at again; zero when never.
	Next time.Time
	// Rolled reports that a window moved on past its reset.
	Rolled bool
}

// Plan brings every quota to now (Window.Advance) and combines them: the
// tightest rate and budget of each unit, when to look next. tokenUnit is
// what one request takes of a token quota (its average cost). The plan is
// the book's, valid until its next Plan (see advance for why it is not
// returned by value).
func (b *Book) Plan(now time.Time, c *Counts, tokenUnit float64) *Plan {
	p := &b.plan
	*p = Plan{ReqRate: math.Inf(1), ReqBudget: math.Inf(1), TokRate: math.Inf(1), TokBudget: math.Inf(1)}
	b.charged = b.charged[:0]
	var st Step
	for _, w := range b.windows {
		unit := 1.0 // less than a request's worth left is spent
		if w.tokens {
			unit = max(tokenUnit, float64(w.blindAmount())/Milli)
		}
		ok := w.advance(&st, now, c.unseen(w), unit, c.Admitted)
		p.Rolled = p.Rolled || st.Rolled
		if !ok {
			continue
		}
		b.charged = append(b.charged, w)
		p.Known++
		p.Blind = p.Blind || w.probing
		if !st.Next.IsZero() && (p.Next.IsZero() || st.Next.Before(p.Next)) {
			p.Next = st.Next
		}
		if w.tokens {
			p.Tokens = true
			p.TokAtOnce = atOnce(p.TokAtOnce, p.TokRate, &st)
			p.TokRate, p.TokBudget = min(p.TokRate, st.Rate), min(p.TokBudget, st.Avail)
		} else {
			p.ReqAtOnce = atOnce(p.ReqAtOnce, p.ReqRate, &st)
			p.ReqRate, p.ReqBudget = min(p.ReqRate, st.Rate), min(p.ReqBudget, st.Avail)
		}
	}
	return p
}

// atOnce is what the tightest rate lets go at once when st joins quotas
// whose tightest rate is rate and lets go before: the tighter one's, and
// at a tie the lesser.
func atOnce(before, rate float64, st *Step) float64 {
	switch {
	case st.Rate < rate:
		return st.AtOnce
	case st.Rate == rate:
		return min(before, st.AtOnce)
	}
	return before
}

// Charge takes a request of the given cost from every known quota, at now
// on the charges' clock (Config.Epoch), leaving share of each quota's limit (a class's
// reserve; see Window.Charge) and room for the stated costs in flight to
// fall short (flight: those of the requests in flight besides this one,
// milli-units, as Counts.InflightCost; see Window.Unconfirmed). If one
// cannot take it, nothing stays charged and that quota is returned.
func (b *Book) Charge(cost float64, now int64, share float64, flight int64) (short *Window) {
	for i, w := range b.charged {
		amount := w.Amount(cost)
		if amount == 0 || w.Charge(amount, now, share, w.Unconfirmed(cost, flight)) {
			w.countBlind(cost, amount)
			continue
		}
		for _, u := range b.charged[:i] {
			b.refund(u, cost)
		}
		return w
	}
	return nil
}

// Refund gives a charge back to every known quota (its request was not
// sent). A blind request gets back what such requests are charged now,
// which the estimate may have moved since; the next response's figures
// true the budget up either way.
func (b *Book) Refund(cost float64) {
	for _, w := range b.charged {
		b.refund(w, cost)
	}
}

func (b *Book) refund(w *Window, cost float64) {
	amount := w.Amount(cost)
	w.Refund(amount)
	w.countBlind(cost, -amount)
}

// SpentUntil is when the budgets could take a request of this cost: the
// wake-up of a quota that is spent now, else the zero time. With share > 0
// (a class's reserve, see Charge), a quota that holds the request only in
// its reserve counts as spent until it refills by itself (RefillAt). ns
// is the time of the question on the charges' clock (Config.Epoch), and now the same
// instant as a time.Time, read only with share > 0 (the caller makes it
// only then: the clock is read once per admission, as ns).
func (b *Book) SpentUntil(cost, share float64, ns int64, now time.Time) time.Time {
	var at time.Time
	for _, w := range b.charged {
		amount := w.Amount(cost)
		switch {
		case amount == 0:
		case w.budget < amount:
			at = later(at, w.wakeAt)
		case share > 0 && w.Reserved(amount, ns, share):
			at = later(at, w.RefillAt(now))
		}
	}
	return at
}

// HeldUntil is when the spent request quotas let a request go; zero when
// none is spent.
func (b *Book) HeldUntil() time.Time {
	var at time.Time
	for _, w := range b.windows {
		if w.known && !w.tokens && w.budget < Milli+w.keep {
			at = later(at, w.wakeAt)
		}
	}
	return at
}

// KeepUntil is until when what the book learnt stays worth keeping without
// traffic, for an endpoint last used at used: the end of its latest stated
// window, and a whole window of its longest length after its last use.
func (b *Book) KeepUntil(used time.Time) time.Time {
	var at time.Time
	for _, w := range b.windows {
		at = later(at, later(w.reset, used.Add(w.window)))
	}
	return at
}

// String describes every quota's state, for debugging.
func (b *Book) String() string {
	parts := make([]string, len(b.windows))
	for i, w := range b.windows {
		parts[i] = w.String()
	}
	return strings.Join(parts, "; ")
}
