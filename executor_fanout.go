package pacer

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"sync"
)

// DoResult is the outcome of one request of [Executor.DoAll]: what
// [Executor.Do] returned for it.
type DoResult struct {
	// Response is non-nil when Err is nil; its body must be closed.
	Response *http.Response
	Err      error
}

// errFanoutStopped is the cause of the context of requests that DoAll
// abandoned because the loop over its results stopped early.
var errFanoutStopped = errors.New("pacer: DoAll: loop stopped before this result was consumed")

// DoAll sends reqs through the executor and yields each request's index and
// result in input order, as soon as that result and all earlier ones are in:
//
//	for i, r := range exec.DoAll(ctx, reqs) {
//		if r.Err != nil {
//			log.Printf("request %d: %v", i, r.Err)
//			continue
//		}
//		process(r.Response)
//		r.Response.Body.Close()
//	}
//
// Requests start in input order, at most MaxConcurrency at a time, and at most
// 2×MaxConcurrency ahead of the result the loop is waiting for (with an
// adaptive bound, twice its max), so one slow
// request bounds the memory held by those behind it. A yielded response holds
// its slot until its body is closed: close it before asking for the next
// result, or at least never keep MaxConcurrency of them open, which would
// leave no slot for the requests still to come. For the same reason the loop
// body must not wait on the same executor (Do, Go, Close): the results DoAll
// holds for later iterations keep their slots until the loop reaches them.
//
// If the loop stops early (break or return), DoAll cancels the requests whose
// results were not yielded yet, closes their response bodies and returns once
// all of its goroutines have ended; responses already yielded are untouched.
// If ctx ends before every result was yielded, the last pair yielded carries
// ctx's error and the iteration ends. After Shutdown began, requests not yet
// started yield errors wrapping [ErrExecutorClosed]. As with Do, every request
// body is closed, whether the request was sent or not.
//
// The requests are sent each time the sequence is iterated.
func (e *Executor) DoAll(ctx context.Context, reqs []*http.Request) iter.Seq2[int, DoResult] {
	return func(yield func(int, DoResult) bool) {
		if len(reqs) == 0 {
			return
		}
		f := newFanout(e, ctx, reqs)
		f.consume(yield)
	}
}

// fanout is one iteration of a DoAll sequence: a producer goroutine starting
// requests in order into a ring of result channels, and the consumer (the
// range loop's goroutine) draining the ring in order.
type fanout struct {
	e    *Executor
	ctx  context.Context
	reqs []*http.Request

	// stop is cancelled when the consumer stops early; it aborts the producer
	// and every request whose result was not yet yielded.
	stop       context.Context
	cancelStop context.CancelCauseFunc

	window  chan struct{}      // one token per started, unconsumed request
	ring    []chan fanoutEntry // result of request i is in ring[i%len(ring)]
	started int                // requests started; set by the producer
	wg      sync.WaitGroup     // the producer and the request goroutines
}

type fanoutEntry struct {
	DoResult
	detach func() bool // unhooks the request from f.stop once yielded
}

func newFanout(e *Executor, ctx context.Context, reqs []*http.Request) *fanout {
	size := min(2*e.max, len(reqs))
	f := &fanout{e: e, ctx: ctx, reqs: reqs, window: make(chan struct{}, size), ring: make([]chan fanoutEntry, size)}
	for i := range f.ring {
		f.ring[i] = make(chan fanoutEntry, 1)
	}
	f.stop, f.cancelStop = context.WithCancelCause(ctx)
	return f
}

func (f *fanout) consume(yield func(int, DoResult) bool) {
	f.wg.Add(1)
	go f.produce()
	next := 0
	defer func() { f.cleanup(next) }()
	for ; next < len(f.reqs); next++ {
		if err := f.ctx.Err(); err != nil {
			yield(next, DoResult{Err: err})
			return
		}
		var ent fanoutEntry
		select {
		case ent = <-f.ring[next%len(f.ring)]:
		case <-f.ctx.Done():
			yield(next, DoResult{Err: f.ctx.Err()})
			return
		}
		<-f.window
		if ent.detach != nil {
			ent.detach()
		}
		if !yield(next, ent.DoResult) {
			next++
			return
		}
	}
}

// cleanup cancels what was not consumed, waits for the producer and every
// request goroutine, and closes the bodies nobody will read. The results of
// requests next to started-1 were not taken from the ring (when index next
// was yielded with ctx's error, its own result was not taken either); once
// every goroutine has ended, each of them is there.
func (f *fanout) cleanup(next int) {
	f.cancelStop(errFanoutStopped)
	f.wg.Wait()
	for i := next; i < f.started; i++ {
		if ent := <-f.ring[i%len(f.ring)]; ent.Response != nil {
			_ = ent.Response.Body.Close()
		}
	}
	for _, req := range f.reqs[f.started:] {
		if req != nil {
			closeRequestBody(req)
		}
	}
}

func (f *fanout) produce() {
	defer f.wg.Done()
	for i, req := range f.reqs {
		select {
		case f.window <- struct{}{}:
		case <-f.stop.Done():
			return
		}
		slot := f.ring[i%len(f.ring)]
		f.started = i + 1
		if req == nil {
			slot <- fanoutEntry{DoResult: DoResult{Err: errors.New("pacer: Executor.DoAll: nil request")}}
			continue
		}
		c, err := f.e.begin(f.ctx, req.Context(), f.stop)
		if err != nil {
			closeRequestBody(req)
			if context.Cause(f.stop) == errFanoutStopped {
				err = errFanoutStopped
			}
			slot <- fanoutEntry{DoResult: DoResult{Err: err}}
			continue
		}
		detach := c.stopExtra
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			resp, err := c.roundTrip(req)
			slot <- fanoutEntry{DoResult: DoResult{Response: resp, Err: err}, detach: detach}
		}()
	}
}
