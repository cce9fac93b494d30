package quota

import (
	"math"
	"time"
)

// Kind is what a quota does by itself over time, as its answers show it:
// set by Observe from the evidence a response brings (R18-R23).
type Kind uint8

const (
	// Unknown: not seen to pass a reset yet.
	Unknown Kind = iota
	// Fixed: a window that jumps back to its limit at its reset (R19).
	Fixed
	// Sliding: refills as it goes, at a rate its reset does not state (R19).
	Sliding
	// ToFull: a bucket whose reset is its time to full, which states its
	// refill (OpenAI's, Anthropic's; R20-R22).
	ToFull
	// Leaky: a bucket that states no reset at all (Shopify's; R18).
	Leaky
)

// fixed reports whether the quota jumps back to its limit at its reset.
func (k Kind) fixed() bool { return k == Fixed }

// refills reports whether the quota refills as it goes.
func (k Kind) refills() bool { return k >= Sliding }

// Mods are what modifies a quota of any kind.
type Mods uint8

const (
	// Shared: others are seen spending from the quota (R35, R43).
	Shared Mods = 1 << iota
	// Inferred: package infer's count of a server that states none (R39).
	Inferred
	// Coordinated: a shared store's budget counts others' spending (R39).
	Coordinated
	// Fleet: spent by a fleet through a store of buckets: Shared from the
	// start, no drift measured (R39).
	Fleet
	// Routed: a route's, whose host's other routes have limiters of ours
	// that may spend it too (X's app quota): what others were measured
	// to spend is held back at R34's bound alone (R34).
	Routed
)

// Config describes a quota before anything is said about it.
type Config struct {
	// Name is the quota's name in the server's responses.
	Name string
	// Tokens marks a quota counted in tokens (R3, R4).
	Tokens bool
	// Safety is the share of an estimated refill that is believed, in (0, 1].
	Safety float64
	// MaxDelay is the longest wait for a reset nothing explains (R32).
	MaxDelay time.Duration
	// Mods are the quota's modifiers from the start (Fleet implies Shared).
	Mods Mods
}

// State follows one quota across responses: what new requests may still
// spend of it (the budget), what it does by itself (its Kind and drift),
// and its window. Its transitions take the time as an argument and change
// only the State; its queries change nothing.
//
// Invariant: a look is out (look.out) only while known.
type State struct {
	cfg  Config
	kind Kind
	mods Mods

	budget budget
	size   size
	win    window
	look   look
	full   fullReader   // the time-to-full reading (R20-R22)
	cost   costEstimate // a blind request's cost (R47-R50)
	drift  drift
	first  firstFigure // the window's first response: what fills measures from
	low    lows
	pace   pace

	setAt  time.Time // when a response last set the budget
	setSeq int64     // Seen.Admissions then (R12)
	known  bool      // the budget describes the current window
	rolled bool      // the reset passed with no answer from the new window yet
	carry  float64   // the budget when the last reset passed (R19)
}

// budget is what new requests may still spend, in milli-units (fixed
// point: charges and refunds of whole requests cancel exactly).
type budget struct {
	have   int64 // the budget
	credit int64 // what of have the refill added since the last figure (R44)
	keep   int64 // what a charge must leave of it besides the debt (R41)
	// capped: others' part of keep is their most, othersMaxShare of the
	// budget, which falls with it (R37)
	capped bool
	// drain is others' spending, milli-units a second, deducted by
	// admission since from; room is what it may take unconfirmed (R37).
	drain, room int64
	from        time.Time
}

// size is how much the quota holds.
type size struct {
	limit float64 // per window as last stated; 0 unknown
	peak  float64 // the highest Remaining seen: the limit's stand-in
	most  int64   // the largest single charge, milli-units (R3)
}

// window is when the quota's window ends and how long it is.
type window struct {
	length time.Duration // stated by policy (stated) or learnt (R16); 0 unknown
	stated bool
	reset  time.Time     // the end of the current window as believed; zero unknown
	stamp  time.Time     // the latest reset a response stated
	origin time.Time     // the first reset stated since a window's boundary (R19)
	jitter time.Duration // how far one window's stated resets wander (R13)
}

// extend moves the window's believed end and stamp on to a later reset.
func (w *window) extend(reset time.Time) {
	w.reset, w.stamp = later(w.reset, reset), later(w.stamp, reset)
}

// look is the one request let through to learn what the budget cannot say.
type look struct {
	out bool
	// refused: the last answer was a refusal that left nothing, so its
	// stated reset is when the quota has room, whatever its kind (R46).
	refused bool
	due     time.Time // when a look is due; zero none
	wake    time.Time // when a spent budget can next take a request
}

// lows are the lowest figures a window and a burst of ours stated.
type lows struct {
	window  float64
	burst   float64 // of the answers of requests out together (R12)
	inBurst bool
}

// firstFigure is the window's first response's reset, Remaining and time.
type firstFigure struct {
	reset     time.Time
	remaining float64
	at        time.Time
}

// pace is what the last plan spread a shared quota at (R43) and whether it
// saw the quota shared (R45).
type pace struct {
	rate   float64
	shared bool
}

// New returns the state of a quota nothing has been said about yet.
func New(c Config) *State {
	if c.Mods&Fleet != 0 {
		c.Mods |= Shared
	}
	return &State{cfg: c, mods: c.Mods, win: window{jitter: initialJitter}}
}

// initialJitter is the wander assumed between one window's stated resets
// before any is seen (R13).
const initialJitter = 250 * time.Millisecond

// Milli is the fixed-point scale of budgets.
const Milli = 1000

// milli is v in milli-units, rounded up; 0 for v ≤ 0 or NaN, and bounded
// far below overflow.
func milli(v float64) int64 {
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxInt64/(2*Milli):
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(v * Milli))
}

// Units is the budget in units.
func (s *State) Units() float64 { return float64(s.budget.have) / Milli }

// Limit is the quota per window as last stated, or the highest Remaining
// seen when none was; 0 when unknown.
func (s *State) Limit() float64 {
	if s.size.limit > 0 {
		return s.size.limit
	}
	return s.size.peak
}

func (s *State) shared() bool { return s.mods&Shared != 0 }

// forgetOthers undoes what the books of an inferred or coordinated quota
// read as others' spending: they never show others (R39).
func (s *State) forgetOthers() {
	if s.mods&(Inferred|Coordinated) == 0 {
		return
	}
	s.mods &^= Shared
	s.drift.rate, s.drift.fall = max(s.drift.rate, 0), 0
	s.budget.drain = 0
}

// reserve is what a token quota keeps back for estimates that fall short
// (R4); 0 for a request quota.
func (s *State) reserve() float64 {
	if !s.cfg.Tokens {
		return 0
	}
	return (1 - s.cfg.Safety) * s.Limit()
}

// length is the window's length, or a lower bound while unlearnt: the time
// from its first response to its reset; 0 when neither is known.
func (s *State) length() time.Duration {
	if s.win.length > 0 || s.first.at.IsZero() {
		return s.win.length
	}
	reset := s.win.reset
	if reset.IsZero() {
		reset = s.first.reset // rolled
	}
	return max(reset.Sub(s.first.at), 0)
}

// reprobe is how long a spent refilling quota waits to look (R42, R46).
func (s *State) reprobe() time.Duration { return max(time.Second, s.win.length/20) }

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// earlierSet is the earlier of a and b, a zero time standing for none.
func earlierSet(a, b time.Time) time.Time {
	if !b.IsZero() && (a.IsZero() || b.Before(a)) {
		return b
	}
	return a
}
