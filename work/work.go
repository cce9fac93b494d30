// Package work says what kind of work a request is, and what it costs, to
// the pacer limiters on its way: its [Class] ([Interactive], the default,
// or [Batch]) and its stated cost ([WithCost]). Both travel in the
// request's context, so they pass through SDKs that take a context.
//
// Batch work spends what a quota affords at once, as all work does, but
// only down to a [Reserve] kept for interactive work: a batch job that
// would spend an hour's quota in seconds leaves the interactive callers
// beside it their share, and when the quota refills, waiting interactive
// work finds the reserve there first. A reserve nobody uses is given back:
// while no interactive work has come for a while, batch work may spend all
// but a small floor of it. Work of one class alone, unmarked work included,
// spends the whole quota.
//
// A pacer Transport or Adaptive limiter takes its reserve from
// pacer.WithBatchReserve or AdaptiveConfig.BatchReserve, and a pacer
// Executor marks all its work with pacer.WithDefaultClass.
package work

import (
	"context"
	"fmt"
	"time"

	"github.com/pacer-go/pacer/internal/mark"
)

// Class is the kind of work a request is: whether a caller is waiting for
// it ([Interactive]) or it is part of a job that only needs to finish
// ([Batch]). A request's class travels in its context ([WithClass]), and
// every limiter on the request's way reads it.
type Class uint8

const (
	// Interactive work has a caller waiting for it. It may spend every
	// quota to its last unit. Unmarked requests are interactive.
	Interactive Class = iota
	// Batch work leaves each quota's reserve to interactive work.
	Batch
)

// String returns the class's name, as metrics show it.
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
	if c > Batch {
		panic(fmt.Sprintf("work: WithClass(%d): not a Class", uint8(c)))
	}
	m := mark.Of(ctx)
	m.Class, m.Classed = uint8(c), true
	return mark.With(ctx, m)
}

// ClassOf returns the class ctx marks its requests with: [Interactive]
// when ctx marks none.
func ClassOf(ctx context.Context) Class { return Class(mark.Of(ctx).Class) }

// WithCost returns a context whose requests cost n units of the endpoint's
// token-denominated quotas (the tokens quotas of LLM APIs): a limiter that
// has learnt such a quota admits the request only when n units are left.
// Request quotas are charged one per request regardless. A negative or NaN
// cost counts as 0.
//
// It is an override, not a requirement: a request with no stated cost is
// charged what the endpoint's requests were learnt to cost each token
// quota (from how its remaining tokens fall between responses; see
// pacer.Stats.Costs), and every response trues the charge up. State a
// cost when it is known before the request goes and the quotas count it
// alike: n is charged to every token quota, so where they count different
// tokens (Anthropic's input and output token limits) leave it unstated.
func WithCost(ctx context.Context, n float64) context.Context {
	if !(n > 0) {
		n = 0
	}
	m := mark.Of(ctx)
	m.Cost = n
	return mark.With(ctx, m)
}

// Reserve is what batch work leaves of each quota to interactive work.
// The zero value means the defaults: [DefaultReserve].
type Reserve struct {
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

// DefaultReserve is the reserve batch work leaves unless
// pacer.WithBatchReserve or AdaptiveConfig.BatchReserve says otherwise. A
// tenth of each quota covers an interactive caller that spends up to a
// tenth of it (PostHog's batch traffic stops at seven tenths, LiteLLM's
// priority reservation is a share of the same kind); the floor of two
// hundredths is what a batch job alone gives up, well under the 5% PostHog
// keeps; a minute without interactive work is several times the gap
// between the calls of an interactive client.
var DefaultReserve = Reserve{Share: 0.1, Floor: 0.02, Idle: time.Minute}
