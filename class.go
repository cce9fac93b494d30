package pacer

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Class is the kind of work a request is: whether a caller is waiting for
// it ([Interactive], the default) or it is part of a job that only needs to
// finish ([Batch]). A request's class travels in its context ([WithClass]),
// so it passes through SDKs that take a context, and every limiter on the
// request's way reads it.
//
// Batch work spends what a quota affords at once, as all work does, but only
// down to a reserve kept for interactive work (see [BatchReserve]): a batch
// job that would spend an hour's quota in seconds leaves interactive callers
// beside it their share, and when the quota refills, waiting interactive
// work finds the reserve there first. A reserve nobody uses is given back:
// while no interactive work has come for a while, batch work may spend all
// but a small floor of it. Work of one class alone, unmarked work included,
// spends the whole quota as before.
type Class uint8

const (
	// Interactive work has a caller waiting for it. It may spend every
	// quota to its last unit. Unmarked requests are interactive.
	Interactive Class = iota
	// Batch work leaves each quota's reserve to interactive work.
	Batch
)

// numClasses is how many classes there are (Stats keeps one entry each).
const numClasses = 2

// String returns the class's name, as Attempt and metrics show it.
func (c Class) String() string {
	switch c {
	case Interactive:
		return "interactive"
	case Batch:
		return "batch"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// WithClass returns a copy of ctx that marks the requests made with it as
// work of class c. It panics if c is not a defined Class.
func WithClass(ctx context.Context, c Class) context.Context {
	if c >= numClasses {
		panic(fmt.Sprintf("pacer: WithClass(%d): not a Class", uint8(c)))
	}
	m := marksOf(ctx)
	m.class, m.classed = c, true
	return context.WithValue(ctx, marksKey{}, m)
}

// ClassOf returns the class ctx marks its requests with: [Interactive]
// when ctx marks none.
func ClassOf(ctx context.Context) Class { return marksOf(ctx).class }

// BatchReserve is what batch work leaves of each quota to interactive work.
// The zero value means the defaults: [DefaultBatchReserve].
type BatchReserve struct {
	// Share is the part of each quota's limit that batch work leaves while
	// interactive work is active, in [0, 1). 0 means 0.1.
	Share float64
	// Floor is the part batch work leaves even while interactive work is
	// idle, in [0, Share]; a late interactive caller finds it there. 0
	// means 0.02; a negative Floor means none.
	Floor float64
	// Idle is how long interactive work must have been absent before batch
	// work may spend the reserve down to the floor. 0 means a minute.
	Idle time.Duration
}

// DefaultBatchReserve is the reserve batch work leaves unless
// [WithBatchReserve] or [AdaptiveConfig.BatchReserve] says otherwise. A
// tenth of each quota covers an interactive caller that spends up to a tenth
// of it (PostHog's batch traffic stops at seven tenths, LiteLLM's priority
// reservation is a share of the same kind); the floor of two hundredths is
// what a batch job alone gives up, well under the 5% PostHog keeps; a
// minute without interactive work is several times the gap between the
// calls of an interactive client.
var DefaultBatchReserve = BatchReserve{Share: 0.1, Floor: 0.02, Idle: time.Minute}

// normalize fills in defaults and checks the fields, naming the option in
// a panic.
func (r BatchReserve) normalize(option string) BatchReserve {
	bad := func(field string, v any) {
		panic(fmt.Sprintf("pacer: %s: BatchReserve.%s out of range: %v", option, field, v))
	}
	d := DefaultBatchReserve
	switch {
	case r.Share == 0:
		r.Share = d.Share
	case !(r.Share > 0 && r.Share < 1):
		bad("Share", r.Share)
	}
	switch {
	case r.Floor == 0:
		r.Floor = min(d.Floor, r.Share)
	case r.Floor < 0:
		r.Floor = 0
	case math.IsNaN(r.Floor) || r.Floor > r.Share:
		bad("Floor", r.Floor)
	}
	switch {
	case r.Idle == 0:
		r.Idle = d.Idle
	case r.Idle < 0:
		bad("Idle", r.Idle)
	}
	return r
}

// WithBatchReserve sets what batch work leaves of each quota to interactive
// work (see [Class]). It panics if a field is out of range.
func WithBatchReserve(r BatchReserve) Option {
	r = r.normalize("WithBatchReserve")
	return func(c *config) { c.batchReserve = r }
}

// WithCost returns a context whose requests cost n units of the endpoint's
// token-denominated quotas (the tokens quotas of LLM APIs): a limiter that
// has learnt such a quota admits the request only when n units are left.
// Request quotas are charged one per request regardless. A negative or NaN
// cost counts as 0.
//
// It is an override, not a requirement: a request with no stated cost is
// charged what the endpoint's requests were learnt to cost each token quota
// (from how its remaining tokens fall between responses; see
// [Stats.Costs]), and every response trues the charge up. State a cost
// when it is known before the request goes and the quotas count it alike:
// n is charged to every token quota, so where they count different tokens
// (Anthropic's input and output token limits) leave it unstated.
func WithCost(ctx context.Context, n float64) context.Context {
	if !(n > 0) {
		n = 0
	}
	m := marksOf(ctx)
	m.cost = n
	return context.WithValue(ctx, marksKey{}, m)
}

// lanes is what a limiter knows of the classes of work that reach it: when
// interactive work last came, and whether any ever did.
type lanes struct {
	reserve BatchReserve
	// interactive is when interactive work last asked to be admitted
	// (package clock); never, before any did.
	interactive atomic.Int64
}

// never marks lanes.interactive before any interactive work came. (The
// package clock is negative in a testing/synctest bubble: 0 is a time.)
const never = math.MinInt64

// interactiveGrain is how finely the last interactive admission is
// recorded: a millisecond against an idle span of a minute.
const interactiveGrain = int64(time.Millisecond)

// note records work of class c asking to be admitted at now (package
// clock).
func (l *lanes) note(c Class, now int64) {
	if c != Interactive {
		return
	}
	if last := l.interactive.Load(); last == never || now-last > interactiveGrain {
		l.interactive.Store(now)
	}
}

// take records the interactive work other saw, when it came later than
// any this one saw.
func (l *lanes) take(other *lanes) {
	at := other.interactive.Load()
	if at == never {
		return
	}
	for {
		last := l.interactive.Load()
		if last != never && last >= at || l.interactive.CompareAndSwap(last, at) {
			return
		}
	}
}

// since is how long before now (package clock) interactive work last asked
// to be admitted; negative when it never did.
func (l *lanes) since(now int64) time.Duration {
	last := l.interactive.Load()
	if last == never {
		return -1
	}
	return time.Duration(max(now-last, 0))
}

// share is the part of each quota's limit a request of class c must leave,
// at now (package clock), and until when that holds (0: indefinitely; R63).
func (l *lanes) share(c Class, now int64) (share float64, until int64) {
	if c != Batch {
		return 0, 0
	}
	if last := l.interactive.Load(); last != never {
		if idleAt := last + int64(l.reserve.Idle); now < idleAt {
			return l.reserve.Share, idleAt
		}
	}
	return l.reserve.Floor, 0
}
