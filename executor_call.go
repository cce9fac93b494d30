package pacer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/pacer-go/pacer/internal/concurrency"
	"github.com/pacer-go/pacer/internal/mark"
	"github.com/pacer-go/pacer/work"
)

// execCall is one accepted call to Do or Go, from admission until its slot is
// released. After Do returns a response, the call is also that response's
// body, so tracking a body costs no allocation of its own.
type execCall struct {
	e      *Executor
	ctx    context.Context         // the caller's ctx, plus cancellation by Shutdown and the rest
	cancel context.CancelCauseFunc // nil when ctx is &shared
	shared callCtx                 // ctx of a Do whose own contexts never end
	req    http.Request            // the request Do sends: the caller's, under ctx
	// outer is the caller's ctx; reqCtx the request's own context when it
	// differs. They tell a cancellation by the caller from one by Shutdown.
	outer, reqCtx      context.Context
	stopReq, stopExtra func() bool // unhook ctx from reqCtx and from the extra context
	links              [2]callLinks
	wait               slotWaiter    // the call's place in the queue for a slot
	inUse              int           // slots in use once the call had its own
	sent               atomic.Int64  // an adaptive bound's: when the request was last written (ns since the call began, +1); 0: not seen
	probe              sendProbe     // an adaptive bound's: when a pacer Transport let the request go
	body               io.ReadCloser // the response body, once Do has one
	opened             time.Time     // when body was handed out; monotonic
	bodyEnded          atomic.Bool
}

// begin admits a call, derives its context and waits for a slot. reqCtx is
// the request's context for Do and DoAll, nil for Go. extra, when non-nil, is
// another context whose end cancels the call (DoAll's stop signal). On error
// the call is over and counted: as rejected when the executor was closed, as
// failed otherwise.
func (e *Executor) begin(ctx, reqCtx, extra context.Context) (*execCall, error) {
	if e.hasClass {
		if !mark.Of(ctx).Classed {
			ctx = work.WithClass(ctx, e.class)
		}
	}
	c := &execCall{e: e, outer: ctx}
	if reqCtx != nil && extra == nil && ctx.Done() == nil && (reqCtx == ctx || reqCtx.Done() == nil) {
		// A request whose contexts never end can only be cancelled by a
		// Shutdown deadline: it runs under the executor's abort context,
		// shared by all such calls, instead of a cancel context of its own.
		c.shared = callCtx{parent: ctx, abort: e.abortCtx}
		c.ctx = &c.shared
	} else {
		c.ctx, c.cancel = context.WithCancelCause(ctx)
	}
	ctxErr := ctx.Err()

	e.mu.Lock()
	if e.closed {
		e.rejected++
		e.mu.Unlock()
		c.release(ErrExecutorClosed)
		return nil, ErrExecutorClosed
	}
	e.submitted++
	if ctxErr != nil {
		e.failed++
		e.mu.Unlock()
		c.release(ctxErr)
		return nil, ctxErr
	}
	e.live.push(c)
	// Fast path: a free slot and nobody queued (FIFO: no overtaking),
	// admitted under one lock.
	fast := e.slots.tryTake()
	if fast {
		e.running++
		c.inUse = e.slots.held
	} else {
		e.slots.enqueue(&c.wait)
		e.waiting++
	}
	e.mu.Unlock()
	c.watch(reqCtx, extra)
	if !fast {
		if err := c.await(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// await waits for the slot the call queued for. On error the call is over
// and counted as failed, and its slot, if granted meanwhile, passed on.
func (c *execCall) await() error {
	e := c.e
	select {
	case <-c.wait.ready:
	case <-c.ctx.Done():
		// Granted as the context ended: the end wins, as it does for
		// semaphore.Weighted, and the slot goes to the next in line.
		err := c.waitErr()
		e.mu.Lock()
		e.slots.leave(&c.wait)
		e.waiting--
		e.failed++
		e.live.remove(c)
		e.checkIdleLocked()
		e.mu.Unlock()
		c.detach()
		return err
	}
	e.mu.Lock()
	if e.aborting {
		// The slot came free after the Shutdown deadline counted this call
		// as waiting: keep that count true and do not start it.
		e.waiting--
		e.failed++
		e.live.remove(c)
		e.slots.release()
		e.checkIdleLocked()
		e.mu.Unlock()
		c.detach()
		return errNotStarted
	}
	e.waiting--
	e.running++
	c.inUse = c.wait.inUse
	e.mu.Unlock()
	return nil
}

// watch makes the end of the request's own context, and of extra, cancel the
// call too. Most requests carry the caller's ctx or none, which costs nothing.
func (c *execCall) watch(reqCtx, extra context.Context) {
	if reqCtx != nil && reqCtx != c.outer && reqCtx.Done() != nil {
		c.reqCtx = reqCtx
		c.stopReq = context.AfterFunc(reqCtx, func() { c.cancel(context.Cause(reqCtx)) })
	}
	if extra != nil {
		c.stopExtra = context.AfterFunc(extra, func() { c.cancel(context.Cause(extra)) })
	}
}

// waitErr explains why Acquire failed.
func (c *execCall) waitErr() error {
	switch {
	case c.outer.Err() != nil:
		return c.outer.Err()
	case context.Cause(c.ctx) == ErrExecutorAborted:
		return errNotStarted
	case c.reqCtx != nil && c.reqCtx.Err() != nil:
		return c.reqCtx.Err()
	}
	return c.ctx.Err()
}

// detach unhooks the call's context from the contexts it watches and cancels
// it, releasing everything derived from it.
func (c *execCall) detach() {
	if c.stopReq != nil {
		c.stopReq()
	}
	if c.stopExtra != nil {
		c.stopExtra()
	}
	c.release(context.Canceled)
}

// release cancels the call's own context, if it has one, with cause.
func (c *execCall) release(cause error) {
	if c.cancel != nil {
		c.cancel(cause)
	}
}

// callCtx is the context of a Do whose caller's and request's contexts can
// never end (no Done channel): their values, cancelled only by a Shutdown
// deadline, through the executor's abort context. All such calls share that
// one cancellation, which saves each call a context of its own: two
// allocations here, and the done channel and child registration the
// transport would add for it.
type callCtx struct {
	parent context.Context // the caller's ctx; parent.Done() == nil
	abort  context.Context // the executor's; its cause is ErrExecutorAborted
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *callCtx) Done() <-chan struct{}       { return c.abort.Done() }
func (c *callCtx) Err() error                  { return c.abort.Err() }

// Value looks key up in the caller's context, then in the abort context. A
// parent that cannot end holds no canceller, so context.Cause, which looks for
// one through Value, finds the abort context's and reports
// ErrExecutorAborted; and a context the transport derives registers with it,
// which costs no allocation per call.
func (c *callCtx) Value(key any) any {
	if v := c.parent.Value(key); v != nil {
		return v
	}
	return c.abort.Value(key)
}

func (c *callCtx) String() string { return fmt.Sprintf("%v.WithExecutorShutdown", c.parent) }

// finish ends a call that holds a slot but no open body, and counts its
// outcome. The slot is free before Shutdown can see the executor idle.
func (c *execCall) finish(ok bool) {
	c.detach()
	e := c.e
	e.mu.Lock()
	e.slots.release()
	e.running--
	if ok {
		e.done++
	} else {
		e.failed++
	}
	e.live.remove(c)
	e.checkIdleLocked()
	e.mu.Unlock()
}

// run executes a Go function under the call's slot.
func (c *execCall) run(fn func(context.Context) error) {
	err := fn(c.ctx)
	if err != nil && context.Cause(c.ctx) == ErrExecutorAborted && !errors.Is(err, ErrExecutorAborted) {
		err = fmt.Errorf("%w: %w", ErrExecutorAborted, err)
	}
	if err != nil && c.e.onError != nil {
		// Before finish, so that Shutdown returns only after the handler ran.
		c.e.onError(err)
	}
	c.finish(err == nil)
}

// roundTrip sends req under the call's slot and hands the slot to the
// response body.
func (c *execCall) roundTrip(req *http.Request) (*http.Response, error) {
	e := c.e
	ctx := c.ctx
	var start time.Time
	if e.adapt != nil {
		// An adaptive bound measures the request: when it was let go
		// and written, and when its answer came.
		start = time.Now()
		ctx = c.traced(start)
	}
	// The request runs under the call's context. A copy inside the call, not
	// a new Request: one allocation fewer per call.
	c.req = *req.WithContext(ctx)
	resp, err := e.client.Do(&c.req)
	if err != nil {
		// The transport reports the call context's plain Err; name the real
		// reason (Shutdown, or the request's own deadline) when it differs.
		if cause := context.Cause(c.ctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		c.finish(false)
		return nil, err
	}
	var s concurrency.Sample
	if e.adapt != nil {
		s = c.sample(start, resp)
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		// Nothing to read, so nothing to hold the slot for.
		if e.adapt != nil {
			e.mu.Lock()
			e.observeLocked(&s)
			e.mu.Unlock()
		}
		c.finish(true)
		return resp, nil
	}
	c.body = resp.Body
	c.opened = time.Now()
	e.mu.Lock()
	if e.adapt != nil {
		e.observeLocked(&s)
	}
	e.running--
	e.done++
	e.open.push(c)
	e.mu.Unlock()
	if rw, ok := c.body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		// Keep the upgraded connection writable, as net/http promises.
		resp.Body = &upgradedBody{execCall: c, w: rw}
	} else {
		resp.Body = c
	}
	return resp, nil
}

// Read reads the response body; its end (io.EOF or a broken connection)
// releases the slot.
func (c *execCall) Read(p []byte) (int, error) {
	n, err := c.body.Read(p)
	if err != nil {
		c.endBody()
	}
	return n, err
}

// Close closes the response body and releases the slot.
func (c *execCall) Close() error {
	err := c.body.Close()
	c.endBody()
	return err
}

// endBody releases the slot held by the response body, exactly once.
func (c *execCall) endBody() {
	if !c.bodyEnded.CompareAndSwap(false, true) {
		return
	}
	c.detach()
	e := c.e
	e.mu.Lock()
	e.slots.release()
	e.open.remove(c)
	e.live.remove(c)
	e.checkIdleLocked()
	e.mu.Unlock()
}

// upgradedBody is the body of a 101 Switching Protocols response, which
// net/http makes writable.
type upgradedBody struct {
	*execCall
	w io.Writer
}

func (b *upgradedBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// Each call is on two intrusive lists: every live call (so a Shutdown
// deadline can cancel them) and, while its body is open, the open bodies in
// the order they were opened (so the oldest is at the head).
const (
	liveLinks = iota
	openLinks
)

type callLinks struct{ prev, next *execCall }

// callList is an intrusive doubly linked list through links[which]; guarded
// by Executor.mu.
type callList struct {
	head, tail *execCall
	n          int
	which      int
}

func (l *callList) push(c *execCall) {
	c.links[l.which] = callLinks{prev: l.tail}
	if l.tail != nil {
		l.tail.links[l.which].next = c
	} else {
		l.head = c
	}
	l.tail = c
	l.n++
}

func (l *callList) remove(c *execCall) {
	lk := &c.links[l.which]
	if lk.prev != nil {
		lk.prev.links[l.which].next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.links[l.which].prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	*lk = callLinks{}
	l.n--
}
