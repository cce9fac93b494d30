// Package storetest checks that a [store.Store] keeps the promises the Store
// interface documents, as testing/fstest does for an fs.FS: a store written
// outside this module proves itself by passing [Run]. [store.Memory]
// defines the semantics, and both it and redisstore pass the suite.
//
// A store proves itself with one test; newPeers is called once per case, so
// every case starts from a clean backend, and each call of the [Peers] it
// returns is another handle on that backend, as another process would open:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Peers {
//			backend := startBackend(t)          // clean, closed by t.Cleanup
//			return func() store.Store {
//				s := mystore.New(backend)     // one handle per "process"
//				t.Cleanup(func() { s.Close() })
//				return s
//			}
//		})
//	}
//
// The suite checks what the Store interface and its types promise: tokens
// are granted at once up to the burst and then at the limit, also into the
// future and beyond the burst; refusals (MaxWait, the context's deadline, a
// pause) book nothing and say when the tokens would have come; Cancel gives
// tokens back to every handle; an unlimited limit ([store.Unlimited] or
// +Inf) books nothing; published limits and pauses reach every handle, and
// the publisher at once; pauses extend but never shorten; Age is the store's
// and grows; keys are independent; ended contexts fail at once with their
// own error; concurrent callers on several handles never get more than the
// limit and lose no Cancel; hostile values are clamped or refused, never a
// panic. With [IdleTTL] it also checks that idle keys are forgotten and used
// ones kept.
// Run your test under -race: concurrent use is part of the contract.
//
// A store that applies Cancel and Publish in the background (the interface
// lets a store backed by a server do so) implements [Flusher], so the suite
// can wait for them before it checks their effect.
//
// The suite runs in real time, because a store backed by a server keeps the
// server's clock, which a testing/synctest bubble cannot fake. It uses rates
// of about one token per second and compares delays with [Tolerance], far
// above scheduling noise; the whole suite takes a few seconds.
//
// Run takes a *testing.T rather than returning an error as fstest.TestFS
// does, following testing/slogtest.Run: each case needs a clean backend of
// its own, which only the caller can make, and each is a subtest that can be
// run alone with -run and fails with its own name.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/pacer-go/pacer/store"
)

// Tolerance is how far a delay the store reports may be from the one the
// suite computes. It covers the time between the suite's clock readings and
// the store's, including a round trip to a server on a loaded machine.
const Tolerance = 150 * time.Millisecond

// Peers returns a new handle on one shared backend each time it is called:
// the same store.Memory, or a new store on the same server and key prefix, as
// another process would have. Handles from one Peers must share every key's
// state; handles from different calls of newPeers must not.
type Peers func() store.Store

// Flusher is implemented by stores that apply Cancel and Publish in the
// background. Flush returns once everything sent before it has taken effect
// for every handle on the backend; the suite calls it before checking.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Option adjusts what [Run] checks.
type Option func(*config)

type config struct {
	idleTTL time.Duration
}

// IdleTTL tells [Run] that the stores forget a key d after it was last used
// (and its bucket refilled and its pause ended), as [store.DefaultIdleTTL]
// describes, and has it check that they do, and that keys in use are kept.
// Without it that case is skipped, since at the default it would take ten
// minutes. Pick d of a second or so: the case waits about 3×d. It panics if
// d < 10×[Tolerance], which the suite could not tell from noise.
func IdleTTL(d time.Duration) Option {
	if d < 10*Tolerance {
		panic("storetest: IdleTTL(" + d.String() + "): must be at least " + (10 * Tolerance).String())
	}
	return func(c *config) { c.idleTTL = d }
}

// Run runs every case of the suite as a subtest of t, one after another.
// newPeers is called once per case and must register its own cleanup with
// the t it is given. It panics on a nil option.
func Run(t *testing.T, newPeers func(t *testing.T) Peers, opts ...Option) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			panic("storetest: Run: nil Option")
		}
		o(&cfg)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, newPeers(t), cfg)
		})
	}
	runBudgetCases(t, newPeers)
}

// cases are the suite, in the order Run runs them; the names state the
// promise each checks.
var cases = []struct {
	name string
	fn   func(t *testing.T, peers Peers, cfg config)
}{
	{"BurstIsGrantedAtOnceThenTokensComeAtTheLimit", testBurstThenLimit},
	{"TokensBeyondTheBurstAreBookedIntoTheFuture", testBeyondBurst},
	{"BurstBelowOneCountsAsOne", testBurstBelowOne},
	{"ZeroOrNegativeTokensBookNothing", testZeroTokens},
	{"FractionalTokensAreBooked", testFractionalTokens},
	{"RefusalBeyondMaxWaitBooksNothing", testMaxWaitRefusal},
	{"ContextDeadlineBoundsTheWait", testContextDeadline},
	{"EndedContextFailsAtOnceWithItsError", testEndedContext},
	{"CancelReturnsTokensToTheBucket", testCancel},
	{"CancelledTokensGoToOtherPeers", testCancelShared},
	{"InfiniteLimitBooksNothing", testInfiniteLimit},
	{"EachBookingIsSpacedAtItsOwnLimit", testLimitChange},
	{"RefusalsDoNotCompoundDebt", testRefusalsDoNotCompoundDebt},
	{"PauseDelaysEveryReservation", testPause},
	{"PauseIsExtendedButNeverShortened", testPauseExtends},
	{"PauseBeyondMaxWaitRefuses", testPauseMaxWait},
	{"LearnedLimitIsSharedBetweenPeers", testLearnedShared},
	{"PublishIsVisibleToThePublisherAtOnce", testPublishVisibleAtOnce},
	{"AgeIsTheStoresAndPublishIgnoresIt", testAge},
	{"BucketIsSharedBetweenPeers", testBucketShared},
	{"KeysAreIndependent", testKeysIndependent},
	{"ConcurrentReservationsNeverExceedTheLimit", testConcurrent},
	{"ConcurrentCallersLoseNoCancel", testConcurrentCancel},
	{"InvalidRequestsAreErrorsOrClampedNeverPanics", testInvalid},
	{"IdleKeysAreForgottenAndUsedOnesKept", testIdleTTL},
}

// flush waits for s's background work, if it has any.
func flush(t *testing.T, s store.Store) {
	t.Helper()
	if f, ok := s.(Flusher); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.Flush(ctx); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
}

// reserve books r on key and fails the test on an error. A zero MaxWait is
// raised to an hour, so that the call's 5 s context does not bound the wait.
func reserve(t *testing.T, s store.Store, key string, r store.Request) store.Grant {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.MaxWait == 0 {
		r.MaxWait = time.Hour
	}
	g, err := s.Reserve(ctx, key, r)
	if err != nil {
		t.Fatalf("Reserve(%q, %+v): %v", key, r, err)
	}
	return g
}

// publish shares st on key and fails the test on an error.
func publish(t *testing.T, s store.Store, key string, st store.State) {
	t.Helper()
	if err := s.Publish(context.Background(), key, st); err != nil {
		t.Fatalf("Publish(%q, %+v): %v", key, st, err)
	}
}

func req(tokens float64, limit float64, burst int) store.Request {
	return store.Request{Tokens: tokens, Limit: limit, Burst: burst}
}

// checkNear reports got unless it is within Tolerance of want.
func checkNear(t *testing.T, what string, want, got time.Duration) {
	t.Helper()
	if d := got - want; d < -Tolerance || d > Tolerance {
		t.Errorf("%s: %v, want %v ± %v", what, got, want, Tolerance)
	}
}

// checkGrant reports g unless its OK is ok and its Delay within Tolerance of
// delay.
func checkGrant(t *testing.T, what string, g store.Grant, ok bool, delay time.Duration) {
	t.Helper()
	if g.OK != ok {
		t.Errorf("%s: OK %v, want %v (grant %+v)", what, g.OK, ok, g)
	}
	checkNear(t, what+": delay", delay, g.Delay)
}
