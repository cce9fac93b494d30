package pacer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/pacer-go/pacer/internal/concurrency"
	"github.com/pacer-go/pacer/observe"
	"github.com/pacer-go/pacer/work"
)

// Errors of an [Executor].
var (
	// ErrExecutorClosed is returned for work submitted to an [Executor] after
	// Shutdown or Close began: the work never started, so it can be retried
	// elsewhere.
	ErrExecutorClosed = errors.New("pacer: executor closed")

	// ErrExecutorAborted is the cause ([context.Cause]) of the context of work
	// that [Executor.Shutdown] cancelled because its deadline passed, and errors
	// returned for such work wrap it. Unlike [ErrExecutorClosed], it means the
	// work had started: the request may have reached the server, so retrying it
	// elsewhere is only safe if it is idempotent.
	ErrExecutorAborted = errors.New("pacer: executor shutdown deadline passed, in-flight work cancelled")
)

// errNotStarted is returned to calls that were accepted but still waiting for
// a slot when Shutdown's deadline passed. It wraps ErrExecutorClosed because,
// like a call refused after Shutdown, it never started and can be retried
// elsewhere.
var errNotStarted = fmt.Errorf("%w: shutdown deadline passed before the call got a slot", ErrExecutorClosed)

// An Executor runs HTTP requests ([Executor.Do]) and other work
// ([Executor.Go]) with a hard bound on how many run at once, and shuts down
// without losing accepted work.
//
// Conceptually it is a FIFO semaphore of n slots in front of an [http.Client];
// n is fixed ([WithMaxConcurrency]) or follows what the server sustains
// ([WithAdaptiveConcurrency]).
// A call first waits for a slot, then calls the client; so when the client's
// transport is a pacer [Transport], no rate token is spent while a call is
// still queued. A slot taken by Do is held until the response body is closed
// or read to the end: the bound is on open responses, which is what a server
// sees, not on requests whose headers have arrived. Whoever gets a response
// must therefore close its body, as with [http.Client.Do]; a body that is never
// closed holds its slot forever, and with n of them the executor stops. Such
// leaks show in [ExecutorStats.OpenBodies] and [ExecutorStats.OldestOpenBody].
//
// An Executor is safe for concurrent use. Create one with [NewExecutor]; stop
// it with [Executor.Shutdown] or [Executor.Close].
type Executor struct {
	client  *http.Client
	max     int // the bound, or the adaptive bound's most
	onError func(error)
	// class marks the work of a caller's context that marks none (see
	// WithDefaultClass); hasClass says whether it was set.
	class    work.Class
	hasClass bool

	mu        sync.Mutex
	slots     slots
	adapt     *concurrency.Limit // nil: the bound is fixed
	moves     observe.BoundMoves
	lastMove  observe.BoundReason
	closed    bool          // Shutdown began: new calls get ErrExecutorClosed
	aborting  bool          // a Shutdown deadline passed: waiting calls never start
	idle      chan struct{} // closed once closed and no accepted work is left
	submitted int64
	rejected  int64
	waiting   int
	running   int
	done      int64
	failed    int64
	live      callList // every accepted call not yet finished, bodies included
	open      callList // calls whose response body still holds a slot, oldest first

	shutdownOnce sync.Once
	aborted      chan struct{} // closed after shutdownErr is set
	shutdownErr  error
	// abortCtx is cancelled, with cause ErrExecutorAborted, when a Shutdown
	// deadline passes: the context of every Do that has none of its own
	// (callCtx).
	abortCtx    context.Context
	cancelAbort context.CancelCauseFunc
}

// ExecutorOption configures an [Executor] in [NewExecutor]. As with the
// Transport's [Option], options are validated when they are created: an
// invalid value panics with a message naming the option.
type ExecutorOption func(*executorConfig)

type executorConfig struct {
	max      int
	adaptMin int // 0: the bound is fixed at max
	onError  func(error)
	class    work.Class
	hasClass bool
}

// WithMaxConcurrency is an [Executor] option: it sets how many calls may hold
// a slot at once: requests in progress plus responses whose body is still
// open, plus running [Executor.Go] functions. The default is
// [DefaultMaxConcurrency]. Given after [WithAdaptiveConcurrency], it fixes
// the bound again: the last of the two wins. It panics if n < 1.
//
// With the default [http.Transport], which keeps only 2 idle connections per
// host, raise MaxIdleConnsPerHost to n as well, or connections beyond two are
// closed after each response and dialled again.
func WithMaxConcurrency(n int) ExecutorOption {
	if n < 1 {
		panic(fmt.Sprintf("pacer: WithMaxConcurrency(%d): n must be at least 1", n))
	}
	return func(c *executorConfig) { c.max, c.adaptMin = n, 0 }
}

// WithErrorHandler is an [Executor] option: it registers fn to receive every
// non-nil error returned by a function run with [Executor.Go], which has no
// caller left to return it to. fn is called on that function's goroutine,
// before its slot is released, so calls may be concurrent and Shutdown waits
// for them. The errors are also counted in [ExecutorStats.Failed], with or
// without the option. It panics if fn is nil.
func WithErrorHandler(fn func(error)) ExecutorOption {
	if fn == nil {
		panic("pacer: WithErrorHandler(nil)")
	}
	return func(c *executorConfig) { c.onError = fn }
}

// WithDefaultClass is an [Executor] option: the work the executor runs is
// of class c (see [work.Class]) unless its context says otherwise
// ([work.WithClass]). An executor that runs a batch job marks it so once,
// here, and every request it sends leaves interactive work its reserve. It
// panics if c is not a defined work.Class.
func WithDefaultClass(c work.Class) ExecutorOption {
	if int(c) >= numClasses {
		panic(fmt.Sprintf("pacer: WithDefaultClass(%d): not a work.Class", uint8(c)))
	}
	return func(cfg *executorConfig) { cfg.class, cfg.hasClass = c, true }
}

// NewExecutor returns an Executor that sends requests with client (nil means
// [http.DefaultClient]). Any client works: a plain one, or one whose Transport
// is a pacer [Transport] so that requests are also rate limited. It panics if
// an option is nil.
func NewExecutor(client *http.Client, opts ...ExecutorOption) *Executor {
	if client == nil {
		client = http.DefaultClient
	}
	cfg := executorConfig{max: DefaultMaxConcurrency}
	for _, opt := range opts {
		if opt == nil {
			panic("pacer: NewExecutor: nil ExecutorOption")
		}
		opt(&cfg)
	}
	abortCtx, cancelAbort := context.WithCancelCause(context.Background())
	e := &Executor{
		abortCtx:    abortCtx,
		cancelAbort: cancelAbort,
		client:      client,
		slots:       slots{limit: cfg.max},
		max:         cfg.max,
		onError:     cfg.onError,
		class:       cfg.class,
		hasClass:    cfg.hasClass,
		idle:        make(chan struct{}),
		aborted:     make(chan struct{}),
		live:        callList{which: liveLinks},
		open:        callList{which: openLinks},
	}
	if cfg.adaptMin > 0 {
		initial := min(max(DefaultMaxConcurrency, cfg.adaptMin), cfg.max)
		e.adapt = concurrency.New(concurrency.Config{Min: cfg.adaptMin, Max: cfg.max, Initial: initial})
		e.slots.limit = initial
	}
	return e
}

// Do waits for a free slot, then sends req with the executor's client and
// returns its response, like [http.Client.Do].
//
// While waiting, Do honours ctx: if ctx ends first, Do returns ctx.Err()
// promptly and takes no slot. The request runs under ctx, which replaces req's
// context as [http.Request.WithContext] does (values come from ctx); if req
// carries a different context, its cancellation is honoured too. Shutdown can
// also cancel the request, see [Executor.Shutdown].
//
// On success the slot stays taken until the response body is closed or read
// to the end (to io.EOF or an error); the caller must close it, as with
// http.Client.Do. A non-2xx status is not an error. On error the slot is
// released at once, and, as with http.Client.Do, req's body is closed.
//
// After Shutdown or Close began, Do returns an error wrapping
// [ErrExecutorClosed] without sending anything.
func (e *Executor) Do(ctx context.Context, req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("pacer: Executor.Do: nil request")
	}
	c, err := e.begin(ctx, req.Context(), nil)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	return c.roundTrip(req)
}

// Go waits for a free slot, honouring ctx, then runs fn in a new goroutine
// and returns nil; the slot is released when fn returns.
//
// Go blocks rather than queueing fn so that a loop submitting work is paced
// by the bound: at most n functions and no backlog of goroutines exist at
// once. It runs fn asynchronously, because work submitted one call at a time
// should still run n at a time. fn must not call Do or Go on the same
// executor: it already holds a slot, and n functions waiting for a second one
// would wait forever. Nor may it call Close, which would wait for fn itself.
//
// fn's context is derived from ctx, so it ends when ctx does, even after Go
// has returned; it is also cancelled, with cause [ErrExecutorAborted], when a
// Shutdown deadline passes. fn's error has no caller to return to: it is
// counted in [ExecutorStats.Failed] and passed to the [WithErrorHandler]
// function. A panic in fn is not recovered.
//
// Go returns ctx.Err() if ctx ends before a slot is free, and an error
// wrapping [ErrExecutorClosed] after Shutdown or Close began; fn does not run
// then.
func (e *Executor) Go(ctx context.Context, fn func(context.Context) error) error {
	if fn == nil {
		return errors.New("pacer: Executor.Go: nil function")
	}
	c, err := e.begin(ctx, nil, nil)
	if err != nil {
		return err
	}
	go c.run(fn)
	return nil
}

// Stats returns a consistent snapshot of the executor's counters.
func (e *Executor) Stats() ExecutorStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.statsLocked()
}

// ExecutorStats is a snapshot of an [Executor]'s counters. Every accepted call
// is in exactly one of Waiting, Running, Done and Failed, so
// Submitted == Waiting + Running + Done + Failed holds in every snapshot.
type ExecutorStats struct {
	// MaxConcurrency is the number of slots: the fixed bound, or the
	// adaptive bound's current value.
	MaxConcurrency int
	// Adaptive reports that the bound adapts ([WithAdaptiveConcurrency]).
	Adaptive bool
	// LastMove is why the adaptive bound last moved; Moves counts its
	// moves by reason.
	LastMove observe.BoundReason
	Moves    observe.BoundMoves
	// Submitted counts calls to Do and Go accepted since NewExecutor.
	Submitted int64
	// Rejected counts calls refused with ErrExecutorClosed because Shutdown
	// had begun.
	Rejected int64
	// Waiting is the number of accepted calls waiting for a slot.
	Waiting int
	// Running is the number of calls holding a slot with work in progress:
	// Do's client.Do call, or a Go function.
	Running int
	// Done counts calls that finished without error: Do returned a response
	// (of any status) or a Go function returned nil.
	Done int64
	// Failed counts calls that finished with an error, including those whose
	// context ended while they waited.
	Failed int64
	// OpenBodies is the number of responses returned by Do whose body was
	// neither closed nor read to the end. Each holds a slot, so
	// Running + OpenBodies <= MaxConcurrency, but for a moment after an
	// adaptive bound fell: calls that hold a slot keep it until they end.
	OpenBodies int
	// OldestOpenBody is how long the oldest open body has been open; 0 if none.
	// One that keeps growing is a body the caller forgot to close.
	OldestOpenBody time.Duration
	// Closed reports that Shutdown or Close has begun.
	Closed bool
}

func (e *Executor) statsLocked() ExecutorStats {
	s := ExecutorStats{
		MaxConcurrency: e.slots.limit,
		Adaptive:       e.adapt != nil,
		LastMove:       e.lastMove,
		Moves:          e.moves,
		Submitted:      e.submitted,
		Rejected:       e.rejected,
		Waiting:        e.waiting,
		Running:        e.running,
		Done:           e.done,
		Failed:         e.failed,
		OpenBodies:     e.open.n,
		Closed:         e.closed,
	}
	if oldest := e.open.head; oldest != nil {
		s.OldestOpenBody = time.Since(oldest.opened)
	}
	return s
}

// Shutdown stops the executor gracefully. New calls to Do and Go fail with
// [ErrExecutorClosed] from the moment Shutdown begins. Every call accepted
// before then, including those still waiting for a slot, runs, and Shutdown
// waits until all have finished and every response body they returned is
// closed, and returns nil.
//
// If ctx ends first, Shutdown cancels what is left: calls still waiting
// return an error wrapping ErrExecutorClosed (they never started); requests
// and Go functions in progress see their context cancelled with cause
// [ErrExecutorAborted], and reads from open response bodies fail. Shutdown
// then returns at once, without waiting for that work to unwind, an error
// that says what it cancelled (calls running and waiting, bodies open) and
// wraps both ctx.Err() and ErrExecutorAborted: errors.Is(err,
// context.DeadlineExceeded) holds for a deadline.
//
// Shutdown is idempotent and safe to call from many goroutines: every call
// waits for the same completion and returns the same result, and a call made
// after completion returns that result at once. The first call whose ctx ends
// cancels the work for all.
func (e *Executor) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		e.checkIdleLocked()
	}
	e.mu.Unlock()

	// A result that already exists wins, so that every call reports the same.
	select {
	case <-e.aborted:
		return e.shutdownErr
	default:
	}
	if !e.await(ctx, e.idle) {
		return e.shutdownErr
	}
	return nil
}

// await waits for ch to close, preferring it when ctx has ended too, and
// reports whether it closed. It returns false when the shutdown was aborted
// first, by this call's ctx or another's; e.shutdownErr is then set.
func (e *Executor) await(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-e.aborted:
		return false
	case <-ctx.Done():
		e.abort(ctx.Err())
		return false
	}
}

// Close is Shutdown without a deadline: it waits for all accepted work and for
// every response body to be closed. A body that is never closed makes Close
// wait forever; use Shutdown with a deadline unless every caller is trusted to
// close its bodies.
func (e *Executor) Close() error {
	return e.Shutdown(context.Background())
}

// shutdownError is Shutdown's result when its context ended before the
// accepted work finished: what it cancelled, for the log.
type shutdownError struct {
	waiting, running, openBodies int
	err                          error // the context's
}

func (e *shutdownError) Error() string {
	return fmt.Sprintf("pacer: executor shutdown cancelled %d running and %d waiting calls with %d response bodies open: %v",
		e.running, e.waiting, e.openBodies, e.err)
}

func (e *shutdownError) Unwrap() []error { return []error{e.err, ErrExecutorAborted} }

// abort records the forced-shutdown result and cancels everything left, once.
func (e *Executor) abort(cause error) {
	e.shutdownOnce.Do(func() {
		e.mu.Lock()
		select {
		case <-e.idle:
			// Work finished while the deadline passed: nothing to cancel, and
			// nothing lost, so report success like the calls that saw idle.
			e.mu.Unlock()
			close(e.aborted)
			return
		default:
		}
		e.aborting = true
		e.shutdownErr = &shutdownError{waiting: e.waiting, running: e.running, openBodies: e.open.n, err: cause}
		cancels := make([]context.CancelCauseFunc, 0, e.live.n+1)
		cancels = append(cancels, e.cancelAbort) // the calls under callCtx
		for c := e.live.head; c != nil; c = c.links[liveLinks].next {
			if c.cancel != nil {
				cancels = append(cancels, c.cancel)
			}
		}
		e.mu.Unlock()
		// Outside the lock: cancelling runs whatever hangs off those contexts.
		// A call that finishes meanwhile is cancelled twice, harmlessly.
		for _, cancel := range cancels {
			cancel(ErrExecutorAborted)
		}
		close(e.aborted)
	})
}

// checkIdleLocked closes e.idle when shutdown has begun and no accepted work
// or open body is left. e.mu must be held.
func (e *Executor) checkIdleLocked() {
	if e.closed && e.waiting == 0 && e.running == 0 && e.open.n == 0 {
		select {
		case <-e.idle:
		default:
			close(e.idle)
		}
	}
}
