// Package concurrency is the adaptive concurrency limit: how many requests
// a client should have in progress at a server, found from what the
// server's answers show, as TCP's congestion window is found from acks.
//
// # The signal
//
// A server with a fixed capacity serves up to some number of requests at
// once (its knee) in its no-load latency; past the knee it queues, so each
// request takes longer in proportion and throughput stays flat: more
// concurrency buys latency, nothing else. Past a ceiling it sheds (503,
// Anthropic's 529). The limit is therefore steered by latency, as
// Netflix's Vegas and Gradient limiters and failsafe-go's adaptive limiter
// are: with F the latency floor (no queue) and m the latency now, a client
// that had n requests in progress and saw m = F·n/knee learns the knee as
// n·F/m, in one step.
//
// Latency is the server's part only: from when the request was written
// (the last attempt's, when a transport retried) to its response. Time a
// call spent waiting for a slot, or in a rate limiter before it was sent,
// is not server latency: read as such, a client paced by a rate limit
// would see queueing where there is none. The time a rate limiter held the
// requests is measured apart (Sample.Admitted): it says the rate, not the
// server, binds.
//
// # Windows
//
// The limit is judged once per window: the answers to the requests sent
// since the last move, at least one per slot and enough for the window's
// medians to be within [precision] of the truth (one standard error, from
// the answers' spread), at most [maxSamples]. A window's answers are split
// by the slots in use when each request started: the more loaded half's
// median m is the latency now, the less loaded half's the window's reading
// of the floor. The first window is the first round alone, the calls that
// filled the initial limit one at a time, so that it sees latency against
// load (unless its answers spread too widely to judge so few). Every 32
// answers a window is looked at early: one plainly queued, at the server
// (above twice [queueHigh], by [earlyConfidence] standard errors) or in a
// rate limiter (held for twice [heldMost] of its time), closes at once, so
// a slow start's overshoot costs part of a round.
//
// # The rules
//
// Every comparison allows for the noise of a median: a cut needs the
// latency [confidence] standard errors above its threshold, growth that it
// be within [growthConfidence] standard errors of the floor (rule 5).
// Rules, in order:
//
//  1. A stated concurrency quota (IETF qu="concurrent-requests") is a hard
//     cap from the answer that states it: the limit drops to it at once.
//  2. A shed answer (503, 529) to a request sent after the last cut cuts
//     at once: the server had no room with that request's n in progress,
//     so the limit goes to at most n−1 (but not below half), and by
//     [shedBackoff] at least (AIMD's multiplicative decrease). n is the
//     slots in use when the call started or when the refusal came,
//     whichever is more: calls granted together reach the server in any
//     order, so the first granted can be the one refused. n−1 is
//     remembered as a ceiling the limit grows past only one slot per
//     [ceilingProbe] windows.
//  3. The floor F is the lowest upper bound of it a window reads: the
//     less loaded half's median plus [confidence] standard errors, the
//     first window's as well as later ones'. A floor read high is lowered
//     by the next window that reads lower; one read low is not, and holds
//     the limit under the knee, every window at the knee reading queued
//     against it (the lowest of many noisy readings is lower than the
//     floor they share, and a first window of one round is the noisiest).
//  4. m > F·(1+[queueHigh]): the server queues. The limit goes to the
//     knee that shows, n̄·F/m for n̄ the mean slots in use, plus
//     [queueSlack] of it, but never below half the limit in one window.
//     4a: if the last cut, or a series of cuts, took [unresponsive] of the
//     load away and the latency stayed, the floor was read too low: it is read again, the
//     knee the series found is forgotten, and the series undone.
//  5. m ≤ F plus [growthConfidence] of m's standard errors (no queue
//     shows), every slot was in use (demand fills the
//     limit) and a rate limiter held the requests for less than
//     [heldMost] of their time: the limit grows, doubling until the
//     first cut (slow start), then by [growth] of itself, a slot at a
//     time just past the last knee found. m's own noise needs its
//     allowance although F is an upper bound: F is the lowest of every
//     window's upper bound (rule 3), and the lowest of dozens sits at
//     the floor or below it, where m ≤ F alone passes a window under the
//     knee half the time or less: a cut that landed a slot under the
//     knee, or a first round read low, then held the limit there for
//     tens of windows, each of which read no queue.
//     5b: a rate limiter held them for more: the server sees n̄·(1−held)
//     of them (Little's law); the limit falls toward that and
//     [rateHeadroom] more, so that slots wait for the slot queue, not in
//     the limiter, by [growth] of itself per window at most: a hold
//     harms no server, and one window's can be a pause (a stated reset
//     waited out), which reads the rate's share low (a cut to half on
//     one such window cost the rate-limited bench 6% of its rate). In
//     slow start it falls by up to half: the last doubling put its
//     excess in the rate limiter, and the window before it, at half the
//     limit, was held for less than [heldMost] of its time.
//  6. Otherwise it holds.
//  7. After [floorProbe] calm windows (every slot in use, no latency
//     cut), and at the first calm window after slow start ends, one
//     window runs at [probeShare] of the limit to read the floor again,
//     as BBR's ProbeRTT does, and its reading replaces the floor: a floor
//     read past the knee, or before the server sped up, is never read
//     lower at that load, and one read low is never read higher. Slow
//     start reads the floor from its first round, one round of answers
//     whose median is known to within several percent (a tenth at an
//     LLM's spread), read high by rule 3: the limit would sit that far
//     past the knee for good. The window after it, at three quarters of
//     the knee the exit found, is below the knee and sized for
//     [precision]; its reading only lowers the floor (rule 3), as the
//     limit it dips from may still be past the knee.
//
// The limit stays within [Config.Min, Config.Max] and under a stated quota.
// [Decide], [OnShed] and [OnQuota] are the rules as pure functions; [Limit]
// gathers windows and applies what they return. None reads a clock or
// locks: the caller passes the samples' times and owns the lock.
package concurrency

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"
)

// Tuning. Each is named where it is used in the package doc's rules.
const (
	// minSamples is the fewest answers a window judges latency on: with
	// fewer, one slow answer moves the median (TCP Vegas judges once per
	// round trip; a round of fewer than 8 is too noisy to judge).
	minSamples = 16
	// precision is the standard error a window's median is sized for, as
	// a share of it, and maxSamples the most answers a window waits for:
	// a server whose latencies spread as an LLM's do (log-normal σ 0.5)
	// needs about 390 for 2%, and gets 256.
	precision  = 0.02
	maxSamples = 256
	// spreadKeep is what a window keeps of the largest spread read
	// before it: one window's half reads its spread low by chance, and a
	// window sized on that reading is judged on noise (a quarter of a
	// knee of 16's windows were sized at 32 answers for 80, and rule 5
	// grew on them past the knee). About ten windows' readings count.
	spreadKeep = 0.9
	// roughFirst is the standard error, as a share of the median, above
	// which the first round's answers are too few to judge by.
	roughFirst = 0.10
	// confidence is how many standard errors of a window's median a
	// decision allows for noise (two: about 98% one-sided).
	// earlyConfidence is what a look at a window before it is full allows:
	// a window looked at every 2·minSamples answers is tested up to
	// maxSamples/(2·minSamples) times, and at two standard errors each,
	// its noise alone would pass one of the looks in about one window of
	// ten (a sequential test's repeated looks need a wider bound).
	confidence      = 2
	earlyConfidence = 3
	// growthConfidence is how many of m's standard errors rule 5 allows
	// above the floor: one, so that a window at the floor grows with odds
	// of at least five in six however low rule 3's minimum has read it,
	// and a queue of three standard errors (a slot past a knee of 16)
	// still holds. Two let the limit grow two slots past a knee of 8 or
	// 16 (request p99 1.38× and 1.22× the best fixed bound's).
	growthConfidence = 1
	// queueHigh is the latency ratio m/F above which (beyond the noise) a
	// window reads as a queue and the limit is cut; between 1 (rule 5's
	// growth) and it the limit holds. Chosen on bench/CONCURRENCY.md's
	// servers.
	queueHigh = 0.08
	// queueSlack is the queue a cut leaves, as a share of the knee it
	// found: a little above the knee keeps the server busy through the
	// noise of the estimate (Vegas keeps alpha..beta requests queued).
	queueSlack = 0.03
	// growth is how much the limit grows per window once out of slow
	// start, as a share of itself (at least 1).
	growth = 0.10
	// shedBackoff is the multiplicative decrease on a shed: Netflix
	// concurrency-limits' AIMD backs off to 0.9 of the limit on a drop.
	shedBackoff = 0.9
	// rateHeadroom is what rule 5b keeps above the requests a rate limit
	// lets reach the server: as many again, so that the rate limiter
	// always has requests ready, and the held share settles at a half,
	// far from the heldMost that lets the limit grow again (with a
	// quarter it settled at a fifth: the limit grew and was cut in turn).
	rateHeadroom = 1.0
	// floorProbe and probeShare: every floorProbe calm windows, one runs
	// at probeShare of the limit to read the floor again (rule 7); a
	// knee model past its knee by a third is below it at three quarters.
	floorProbe = 128
	probeShare = 0.75
	// unresponsive: a latency cut that took at least this share of the
	// load away, after which the latency stayed within half of it of what
	// it was, shows a floor read too low (rule 4a).
	unresponsive = 0.10
	// ceilingProbe is how many windows the limit waits at a ceiling a
	// shed taught before it grows past it by one.
	ceilingProbe = 32
)

// Config bounds a Limit.
type Config struct {
	// Min and Max bound the limit: 1 ≤ Min ≤ Max.
	Min, Max int
	// Initial is the first limit, within [Min, Max].
	Initial int
}

// Outcome is what an answer says of the server's load.
type Outcome uint8

const (
	// Served: the server did the work; its latency is a sample.
	Served Outcome = iota
	// Shed: the server refused for overload (503, 529).
	Shed
	// Ignored: an answer that says nothing of load (a rate limit's 429,
	// an error answered without the work a success takes) or no answer.
	Ignored
)

// Sample is one call's answer.
type Sample struct {
	// Start is when the call took its slot and began; Admitted when a
	// rate limiter let its last attempt go (Start if none held it); Sent
	// when that attempt was written (Admitted when unknown: a connection's
	// dial lies between them); Done when its answer arrived.
	Start, Admitted, Sent, Done time.Time
	// InUse is how many slots were in use when the call started, its own
	// included; Answered how many when its answer came (0: not known).
	InUse, Answered int
	// Outcome is what the answer says.
	Outcome Outcome
	// Quota is the concurrency quota the answer stated; 0 if none.
	Quota int
}

// Reason is why the limit moved.
type Reason uint8

const (
	// None: the limit has not moved.
	None Reason = iota
	// Headroom: latency stayed near its floor while demand filled the
	// limit.
	Headroom
	// Latency: latency climbed above its floor: the server queues.
	Latency
	// Overload: the server shed a request (503, 529).
	Overload
	// Quota: the server stated a concurrency quota below the limit.
	Quota
	// Probe: the limit dipped for one window to read the latency floor
	// again, or came back after it.
	Probe
	// Rate: a rate limiter held the requests before they were sent, so
	// the limit keeps only what the rate lets reach the server.
	Rate
	// NumReasons counts the reasons.
	NumReasons
)

func (r Reason) String() string {
	switch r {
	case None:
		return "none"
	case Headroom:
		return "headroom"
	case Latency:
		return "latency"
	case Overload:
		return "overload"
	case Quota:
		return "quota"
	case Rate:
		return "rate"
	case Probe:
		return "probe"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Window is what one window of answers showed.
type Window struct {
	// Served is how many answers were served; Median their median latency.
	Served int
	// Median is the median latency of the more loaded half of the
	// answers (by the slots in use when each started); Least that of the
	// less loaded half; MedianErr and LeastErr their standard errors, from
	// the answers' spread (their interquartile range).
	Median, Least, MedianErr, LeastErr time.Duration
	// MeanInUse is the mean InUse of the more loaded half; Peak the most.
	MeanInUse float64
	Peak      int
	// Held is the share of the served calls' time spent before their
	// request was sent (in a rate limiter): 0 when every request went at
	// once.
	Held float64
}

// State is what the rules remember between windows.
type State struct {
	Limit float64
	// Floor is the lowest window median seen; 0 before the first.
	Floor time.Duration
	// SlowStart: no cut yet; the limit doubles while it may grow.
	SlowStart bool
	// Knee is the concurrency the last latency cut found the server
	// serves without queueing; 0 if none.
	Knee float64
	// Calm counts the windows, every slot in use, since the last latency
	// cut or probe; ProbeFrom is the limit a probe window dipped from (0:
	// no probe under way). Reread: slow start ended, and the floor is
	// read again at the next calm window, or is being read (rule 7).
	Calm      int
	ProbeFrom float64
	Reread    bool
	// CutInUse and CutMedian are the load and latency of the window that
	// made the last latency cut; CutInUse 0 if none.
	CutInUse  float64
	CutMedian time.Duration
	// CutFrom is the limit the series started from. LastInUse and
	// LastMedian are the load and latency of the last cut's window.
	CutFrom    float64
	LastInUse  float64
	LastMedian time.Duration
	// Ceiling is the most in progress a shed taught; 0 if none. Probe
	// counts the windows spent at it since it was taught or last probed.
	Ceiling float64
	Probe   int
	// Quota is the concurrency quota the server stated last; 0 if none.
	Quota int
}

// Decide applies rules 3 to 6 to a window: the state after it and the
// reason the limit moved (None if it did not).
func Decide(st State, w Window, cfg Config) (State, Reason) {
	if w.Served == 0 || w.Median <= 0 {
		return st, None
	}
	prev, old := st.Floor, st.Limit
	// Rule 3: the floor is the lowest upper bound a window gives of it.
	if f := floorOf(w); st.Floor == 0 || f < st.Floor {
		st.Floor = f
	}
	if st.ProbeFrom > 0 {
		st = endProbe(st, w, prev, cfg)
		return st, moved(old, st, Probe)
	}
	st, r := steer(st, w, cfg)
	if r == Latency || st.SlowStart || w.Peak < int(old) {
		st.Calm = 0
		return st, r
	}
	if st.Calm++; (st.Calm >= floorProbe || st.Reread) && r == None && st.Limit < float64(cfg.Max) {
		// Rule 7: a floor read at a load past the knee (the first round
		// too spread to judge, a shed before it closed) or before the
		// server sped up is never read lower by windows at that load;
		// one window in floorProbe runs at probeShare of the limit to
		// read it again (BBR's ProbeRTT). Not at Max: no reading would
		// move the limit there.
		st.ProbeFrom = st.Limit
		st.Limit = max(float64(cfg.Min), st.Limit*probeShare)
		return st, moved(old, st, Probe)
	}
	return st, r
}

// endProbe ends rule 7's probe window w: its reading is the floor now,
// higher or lower, unless it was slow start's reread, which only lowers it
// (rule 3, applied already to prev); and the limit goes back. A floor that
// fell takes the knee found against it down in proportion (the knee is
// in-use·floor/latency), and the limit back no higher than that knee and
// [queueSlack]: the limit the probe dipped from was set by the knee read
// against the higher floor.
func endProbe(st State, w Window, prev time.Duration, cfg Config) State {
	if !st.Reread {
		st.Floor = floorOf(w)
	}
	back := st.ProbeFrom
	if st.Knee > 0 && prev > 0 && st.Floor < prev {
		st.Knee *= float64(st.Floor) / float64(prev)
		back = min(back, max(st.Knee*(1+queueSlack), st.Limit))
	}
	st.Limit, st.ProbeFrom, st.Calm, st.Reread = back, 0, 0, false
	return clamp(st, cfg)
}

// steer applies rules 4 to 6 to a window.
func steer(st State, w Window, cfg Config) (State, Reason) {
	old := st.Limit
	switch {
	case queued(w, st.Floor, queueHigh, confidence):
		if unmoved(w, st.CutInUse, st.CutMedian) || unmoved(w, st.LastInUse, st.LastMedian) {
			// Rule 4a: the last cut took load away and the latency
			// stayed: it is not this client's queue, and the floor was
			// read too low (a lucky window). Read it again here.
			st.Floor, st.CutInUse, st.LastInUse, st.Knee = floorOf(w), 0, 0, 0
			st.Limit = max(st.Limit, st.CutFrom) // and the cut undone
			st = clamp(st, cfg)
			return st, moved(old, st, Headroom)
		}
		st.LastInUse, st.LastMedian = w.MeanInUse, w.Median
		if st.CutInUse == 0 {
			// The first cut of a series: 4a compares the load and
			// latency after the series' cuts with the load that began
			// it, however small each cut was.
			st.CutInUse, st.CutMedian, st.CutFrom = w.MeanInUse, w.Median, st.Limit
		}
		st.Knee = w.MeanInUse * float64(st.Floor) / float64(w.Median)
		st.Limit = max(st.Knee*(1+queueSlack), st.Limit/2)
		st = endSlowStart(st)
		st = clamp(st, cfg)
		return st, moved(old, st, Latency)
	case w.Held >= heldMost && w.Peak >= int(st.Limit):
		// Rule 5b: a rate limiter holds the requests before they are
		// sent; the server sees MeanInUse·(1−Held) of them (Little's
		// law), the rest only wait in the rate limiter. Keep the
		// server's share and [rateHeadroom] of it, so that the rate
		// limiter always has requests ready when it lets one go; a
		// step of [growth] at most, as rule 5 grows, but in slow start
		// down to half: the last doubling's excess waits there.
		target, step := w.MeanInUse*(1-w.Held)*(1+rateHeadroom), st.Limit*(1-growth)
		if target >= step {
			return st, None
		}
		lowest := step
		if st.SlowStart {
			lowest = st.Limit / 2
		}
		st.Limit = max(target, lowest)
		st = clamp(st, cfg)
		return st, moved(old, st, Rate)
	case float64(w.Median)-growthConfidence*float64(w.MedianErr) <= float64(st.Floor) &&
		w.Peak >= int(st.Limit) && w.Held < heldMost:
		st.CutInUse = 0 // a series of cuts ends where the limit grows again
		st = clamp(grow(st), cfg)
		return st, moved(old, st, Headroom)
	}
	return st, None
}

// unmoved reports whether w shows at least [unresponsive] less load than
// a cut's window of inUse and median had, and a latency within half of it
// of that window's: the load fell and the latency did not follow (rule 4a).
func unmoved(w Window, inUse float64, median time.Duration) bool {
	return inUse > 0 && w.MeanInUse <= inUse*(1-unresponsive) &&
		float64(w.Median) >= float64(median)*(1-unresponsive/2)
}

// grow applies rule 5's growth, within a ceiling a shed taught.
func grow(st State) State {
	step := max(1, st.Limit*growth)
	switch {
	case st.SlowStart || (st.Knee == 0 && st.Ceiling == 0):
		step = st.Limit // nothing learnt that bounds it (rule 4a forgets a mistaken knee)
	case st.Limit >= st.Knee*(1+queueSlack) && st.Limit < st.Knee*(1+2*queueHigh):
		step = 1 // just past the knee a cut found: probe it a slot at a time
	}
	next := st.Limit + step
	if st.Ceiling > 0 && next > st.Ceiling {
		next = max(st.Limit, st.Ceiling)
		if st.Limit >= st.Ceiling {
			if st.Probe++; st.Probe >= ceilingProbe {
				st.Ceiling++
				st.Probe = 0
			}
			next = st.Ceiling
		}
	}
	st.Limit = next
	return st
}

// floorOf is the upper bound w gives of the floor (rule 3): its less
// loaded half's median and [confidence] standard errors. An upper bound,
// the first reading as well as later ones: a floor read high is lowered by
// the next window that reads lower, one read low only by rules 4a and 7,
// and meanwhile it holds the limit below the knee (every window at the
// knee reads queued against it).
func floorOf(w Window) time.Duration { return w.Least + confidence*w.LeastErr }

// queued reports whether w's latency is above floor by more than a share
// of it, beyond the noise of its median (sigmas standard errors).
func queued(w Window, floor time.Duration, share, sigmas float64) bool {
	return floor > 0 && float64(w.Median)-sigmas*float64(w.MedianErr) > float64(floor)*(1+share)
}

// heldMost is the share of time before sending (Window.Held) above which
// a rate limit, not the server, is read as binding: then the server does
// not see the slots the limit would add.
const heldMost = 0.25

// OnShed applies rule 2: the state after a shed answer to a request that
// met inUse slots in use.
func OnShed(st State, inUse int, cfg Config) (State, Reason) {
	old := st.Limit
	// At most halved by one shed, as TCP's window is by one loss: the
	// load a request met is known only within the calls started with it.
	st.Ceiling = max(1, float64(inUse-1), st.Limit/2)
	st.Probe = 0
	st.Limit = max(1, min(st.Limit*shedBackoff, st.Ceiling))
	st = endSlowStart(st)
	st = clamp(st, cfg)
	return st, moved(old, st, Overload)
}

// endSlowStart ends slow start, if under way, and has the floor read
// again (rule 7): the floor slow start read is the first round's, one
// round of answers, or a window's at a load that may have queued.
func endSlowStart(st State) State {
	if st.SlowStart {
		st.SlowStart, st.Reread = false, true
	}
	return st
}

// OnQuota applies rule 1: the state after an answer stating quota.
func OnQuota(st State, quota int, cfg Config) (State, Reason) {
	old := st.Limit
	st.Quota = quota
	st = clamp(st, cfg)
	return st, moved(old, st, Quota)
}

// clamp keeps the limit within the configured bounds and the quota.
func clamp(st State, cfg Config) State {
	hi := float64(cfg.Max)
	if st.Quota > 0 {
		hi = min(hi, float64(st.Quota))
	}
	st.Limit = min(max(st.Limit, float64(cfg.Min)), hi)
	return st
}

// moved is r if the whole limit changed from old, else None.
func moved(old float64, st State, r Reason) Reason {
	if int(old) == int(st.Limit) {
		return None
	}
	return r
}

// Limit is an adaptive concurrency limit: it takes every call's Sample and
// says when the limit moves. It is not safe for concurrent use: the
// caller's lock guards it.
type Limit struct {
	cfg   Config
	st    State
	since time.Time // the window holds requests sent at or after it
	cut   time.Time // a shed counts only for requests sent at or after it

	points         []point
	low, high      []point // split's halves of points
	roughStart     bool    // the first round was too spread to judge alone
	need           int     // samples a window needs for its medians' precision
	spread         float64 // the spread (σ over the median) windows are sized for
	peak           int
	server, before time.Duration
}

// New returns a Limit at cfg.Initial. It panics if cfg is invalid.
func New(cfg Config) *Limit {
	if cfg.Min < 1 || cfg.Max < cfg.Min || cfg.Initial < cfg.Min || cfg.Initial > cfg.Max {
		panic("concurrency: invalid Config")
	}
	return &Limit{cfg: cfg, st: State{Limit: float64(cfg.Initial), SlowStart: true}}
}

// Current is the limit: how many calls may be in progress.
func (l *Limit) Current() int { return int(l.st.Limit) }

// State is the rules' state, for tests and stats.
func (l *Limit) State() State { return l.st }

// Observe takes one call's sample and reports the limit's move, if it
// moved: the new limit and why.
func (l *Limit) Observe(s Sample) (limit int, r Reason) {
	if s.Quota > 0 && s.Quota != l.st.Quota {
		if l.st, r = OnQuota(l.st, s.Quota, l.cfg); r != None {
			return l.Current(), r
		}
	}
	switch s.Outcome {
	case Shed:
		if s.Sent.Before(l.cut) {
			return l.Current(), None // sent before the last cut: already answered
		}
		l.st, r = OnShed(l.st, max(s.InUse, s.Answered), l.cfg)
		l.cut = s.Done
		if l.st.Floor != 0 {
			// The first round goes on: the answers of its ramp, each at
			// the load it met, are still the first look at the floor.
			l.since = s.Done
			l.reset()
		}
		return l.Current(), r
	case Ignored:
		return l.Current(), None
	}
	if s.Sent.Before(l.since) {
		return l.Current(), None // sent under an older limit
	}
	l.points = append(l.points, point{rtt: s.Done.Sub(s.Sent), inUse: s.InUse})
	l.peak = max(l.peak, s.InUse)
	l.server += s.Done.Sub(s.Admitted)
	l.before += s.Admitted.Sub(s.Start)
	// A window closes with enough answers for its medians' precision, or
	// after a round (a slot's worth) when its answers are already plainly
	// queued, at the server or in a rate limiter (checked every
	// 2·minSamples answers): a slow start's overshoot costs part of a
	// round, not a full window.
	// The first window is the first round alone: the calls that filled
	// the initial limit one at a time, whose latency against the load
	// they met is the first look at the floor and at any queue.
	n := len(l.points)
	var w Window
	if l.st.Floor == 0 && !l.roughStart {
		if n < max(minSamples, l.Current()) {
			return l.Current(), None
		}
		if w = l.window(); float64(w.LeastErr) > roughFirst*float64(w.Least) {
			// Too few answers for latencies this spread (an LLM's): the
			// window goes on, and its floor is read at the initial limit.
			l.roughStart = true
			return l.Current(), None
		}
	} else {
		full := max(2*minSamples, l.Current(), l.need)
		if n < 2*minSamples || (n < full && n%(2*minSamples) != 0) {
			return l.Current(), None
		}
		if w = l.window(); n < full && !queued(w, l.st.Floor, 2*queueHigh, earlyConfidence) && w.Held < 2*heldMost {
			return l.Current(), None
		}
	}
	l.st, r = Decide(l.st, w, l.cfg)
	l.reset()
	if r != None {
		l.since = s.Done
	}
	return l.Current(), r
}

// point is one served answer of a window.
type point struct {
	rtt   time.Duration
	inUse int
}

// window summarises the samples gathered, and sizes the next window so
// that its medians' standard error is about [precision] of them.
//
// The answers are split by the slots in use when their requests started:
// the more loaded half gives the latency now, the less loaded half the
// window's candidate for the floor. Under a steady load the halves are
// alike; in a window whose load grew (the first, which fills the initial
// limit one call at a time), the floor is read where the load was lowest,
// and the latency where it was highest.
func (l *Limit) window() Window {
	low, high := l.split()
	n := len(l.points)
	w := Window{Served: n, Peak: l.peak}
	for _, p := range high {
		w.MeanInUse += float64(p.inUse)
	}
	w.MeanInUse /= float64(len(high))
	var sigma, sigmaHigh float64
	w.Median, sigmaHigh = median(high)
	w.Least, sigma = median(low)
	w.MedianErr, w.LeastErr = medianErr(sigmaHigh, len(high)), medianErr(sigma, len(low))
	if cv := sigma / float64(w.Least); cv > 0 {
		l.spread = max(cv, l.spread*spreadKeep)
		l.need = min(maxSamples, 2*int(math.Ceil(math.Pow(1.2533*l.spread/precision, 2))))
	}
	if total := l.server + l.before; total > 0 {
		w.Held = float64(l.before) / float64(total)
	}
	return w
}

// split parts the window's answers into its less and more loaded halves
// (l.low and l.high, reused). Answers of the median load go to either half
// in turn: the answers arrive in the order they completed, fastest first
// among those sent together, and a half of the first to arrive would be a
// half of the fastest.
func (l *Limit) split() (low, high []point) {
	l.low, l.high = l.low[:0], l.high[:0]
	slices.SortStableFunc(l.points, func(a, b point) int { return a.inUse - b.inUse })
	mid := l.points[len(l.points)/2].inUse
	turn := false
	for _, p := range l.points {
		switch {
		case p.inUse < mid:
			l.low = append(l.low, p)
		case p.inUse > mid:
			l.high = append(l.high, p)
		default:
			if turn {
				l.high = append(l.high, p)
			} else {
				l.low = append(l.low, p)
			}
			turn = !turn
		}
	}
	if len(l.low) == 0 || len(l.high) == 0 {
		return l.points, l.points
	}
	return l.low, l.high
}

// medianErr is the standard error of the median of n answers spread as σ:
// 1.2533·σ/√n.
func medianErr(sigma float64, n int) time.Duration {
	return time.Duration(1.2533 * sigma / math.Sqrt(float64(n)))
}

// median returns the median latency of ps, which it reorders, and the
// spread of the latencies as a standard deviation (σ ≈ IQR/1.349, as for
// a normal spread: robust to the slow tail).
func median(ps []point) (time.Duration, float64) {
	slices.SortFunc(ps, func(a, b point) int { return cmp.Compare(a.rtt, b.rtt) })
	n := len(ps)
	return ps[n/2].rtt, float64(ps[n*3/4].rtt-ps[n/4].rtt) / 1.349
}

func (l *Limit) reset() {
	l.points = l.points[:0]
	l.peak = 0
	l.server, l.before = 0, 0
}
