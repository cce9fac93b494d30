package pacer

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/work"
)

// numClasses is how many classes of work there are (Stats keeps one
// entry each).
const numClasses = int(work.Batch) + 1

// normalizeReserve fills in r's defaults and checks its fields, naming
// the option in a panic.
func normalizeReserve(r work.Reserve, option string) work.Reserve {
	bad := func(field string, v any) {
		panic(fmt.Sprintf("pacer: %s: work.Reserve.%s out of range: %v", option, field, v))
	}
	d := work.DefaultReserve
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
// work (see [work.Class]). It panics if a field is out of range.
func WithBatchReserve(r work.Reserve) Option {
	r = normalizeReserve(r, "WithBatchReserve")
	return func(c *config) { c.batchReserve = r }
}

// lanes is what a limiter knows of the classes of work that reach it: when
// interactive work last came, and whether any ever did.
type lanes struct {
	reserve work.Reserve
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
func (l *lanes) note(c work.Class, now int64) {
	if c != work.Interactive {
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
func (l *lanes) share(c work.Class, now int64) (share float64, until int64) {
	if c != work.Batch {
		return 0, 0
	}
	if last := l.interactive.Load(); last != never {
		if idleAt := last + int64(l.reserve.Idle); now < idleAt {
			return l.reserve.Share, idleAt
		}
	}
	return l.reserve.Floor, 0
}
