package pacer

import "sync"

// reporter delivers an [Executor]'s progress reports ([WithProgress]). Its
// goroutine exists only while a report is pending, so an idle executor holds
// none, and Shutdown stops it: a report goroutine always has an owner, the
// executor until Shutdown and the Shutdown call after it.
type reporter struct {
	fn    func(ExecutorStats) // nil: nothing is reported
	stats func() ExecutorStats

	mu      sync.Mutex
	running bool          // a report goroutine exists
	pending bool          // the state changed since that goroutine last read it
	final   bool          // the pending report is Shutdown's last one
	exited  chan struct{} // non-nil once stopped; closed when no goroutine is left

	// Touched only by the report goroutine; one goroutine hands over to the
	// next through mu.
	last     ExecutorStats
	reported bool
}

// changed records a state change and starts a report goroutine unless one is
// running: reports are coalesced, and the goroutine reads the latest state.
// After stop nothing more is reported.
func (r *reporter) changed() {
	if r.fn == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exited != nil {
		return
	}
	r.pending = true
	r.startLocked()
}

func (r *reporter) startLocked() {
	if !r.running {
		r.running = true
		go r.run()
	}
}

func (r *reporter) run() {
	for {
		r.mu.Lock()
		if !r.pending {
			r.running = false
			if r.exited != nil {
				close(r.exited)
			}
			r.mu.Unlock()
			return
		}
		final := r.final
		r.pending, r.final = false, false
		r.mu.Unlock()

		s := r.stats()
		if final && r.reported && s == r.last {
			continue // fn already has the final state
		}
		r.last, r.reported = s, true
		r.fn(s)
	}
}

// stop ends reporting and returns a channel closed once no report goroutine
// is left. With final (Shutdown found all work finished), one last report of
// the current state is delivered first, unless fn already has that state:
// the change that finished the work may not have been reported yet, since
// Shutdown can see the work finished before the goroutine that finished it
// calls changed. Without final (a Shutdown deadline passed), any pending
// report is dropped, the final one too, and the caller does not wait for a
// call of fn in progress. Only the first stop starts a final report; all
// share one channel.
func (r *reporter) stop(final bool) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exited == nil {
		r.exited = make(chan struct{})
		if final && r.fn != nil {
			r.pending, r.final = true, true
			r.startLocked()
		}
		if !r.running {
			close(r.exited)
		}
	}
	if !final {
		r.pending, r.final = false, false
	}
	return r.exited
}
