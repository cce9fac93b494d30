package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/store"
)

// Defaults of the options.
const (
	DefaultPrefix        = "pacer:"
	DefaultTimeout       = 100 * time.Millisecond
	DefaultLeaseWindow   = 100 * time.Millisecond
	DefaultMaxLease      = 512
	DefaultProbeInterval = time.Second
)

// ErrClosed is returned by calls on a Store after Close.
var ErrClosed = errors.New("redisstore: store closed")

// FailureMode says what a Store does with the keys of a shard (the one Redis,
// or a cluster master) while it is unreachable.
type FailureMode int

const (
	// FailOpen paces each process with a local limiter at
	// [WithFallbackShare] of the limit until the shard answers again.
	FailOpen FailureMode = iota
	// FailClosed refuses reservations with a *pacer.RateLimitError whose Err
	// is a *[ShardError] (what failed, on which master) and whose RetryAt is
	// the shard's next probe.
	FailClosed
)

func (m FailureMode) String() string {
	switch m {
	case FailOpen:
		return "fail-open"
	case FailClosed:
		return "fail-closed"
	}
	return fmt.Sprintf("FailureMode(%d)", int(m))
}

// Option configures a Store.
type Option func(*Store)

// WithPrefix sets the prefix of every Redis key the store writes (default
// [DefaultPrefix]); stores with different prefixes share nothing. On a Redis
// Cluster, keep braces out of it: a {…} hash tag in the prefix puts every key
// on one master.
func WithPrefix(prefix string) Option {
	return func(s *Store) { s.prefix = prefix }
}

// WithTimeout bounds each Redis call (default [DefaultTimeout]). A call that
// takes longer counts as a failure of the key's shard ([ErrTimeout]).
func WithTimeout(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("redisstore: WithTimeout(%v): timeout must be > 0", d))
	}
	return func(s *Store) { s.timeout = d }
}

// WithIdleTTL sets how long Redis keeps a key nobody uses, counted from when
// its bucket is full again and its pause over (default
// [store.DefaultIdleTTL]).
func WithIdleTTL(d time.Duration) Option {
	if d < time.Millisecond {
		panic(fmt.Sprintf("redisstore: WithIdleTTL(%v): TTL must be at least 1ms", d))
	}
	return func(s *Store) { s.idleTTL = d }
}

// WithLeaseWindow sets how much of its own traffic a process books per Redis
// call (default [DefaultLeaseWindow]): at a local demand of r tokens per
// second it leases about r×d tokens at once. Leases end d after their last
// token was due; what is left then goes back to Redis. 0 disables leases: one
// Redis call per reservation.
func WithLeaseWindow(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("redisstore: WithLeaseWindow(%v): window must be >= 0", d))
	}
	return func(s *Store) { s.leaseWindow = d }
}

// WithMaxLease caps the tokens of one lease (default [DefaultMaxLease]).
func WithMaxLease(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("redisstore: WithMaxLease(%d): must be >= 1", n))
	}
	return func(s *Store) { s.maxLease = float64(n) }
}

// WithFailureMode sets what happens to the keys of a shard while it is
// unreachable (default [FailOpen]).
func WithFailureMode(m FailureMode) Option {
	if m != FailOpen && m != FailClosed {
		panic(fmt.Sprintf("redisstore: WithFailureMode(%v): unknown mode", m))
	}
	return func(s *Store) { s.mode = m }
}

// WithFallbackShare sets the fraction of each limit (and burst) a process
// uses on its own while the key's shard is unreachable in [FailOpen] mode, in
// (0, 1]; default 1. With N processes, 1/N keeps their sum within the quota.
// The local buckets last across outages: a shard that fails again moments
// after it came back does not hand out a fresh burst.
func WithFallbackShare(f float64) Option {
	if !(f > 0 && f <= 1) {
		panic(fmt.Sprintf("redisstore: WithFallbackShare(%v): share must be in (0, 1]", f))
	}
	return func(s *Store) { s.share = f }
}

// WithProbeInterval sets how often an unreachable shard is tried again
// (default [DefaultProbeInterval]). A probe runs the reservation script,
// booking nothing, on a key of that shard, sent to its master alone: a PING
// would prove nothing on a cluster, where another node may answer it, and
// where a master answers it even while it refuses keyed commands.
func WithProbeInterval(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("redisstore: WithProbeInterval(%v): interval must be > 0", d))
	}
	return func(s *Store) { s.probeInterval = d }
}

// WithLogger sets where the store reports losing and regaining each shard
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	if l == nil {
		panic("redisstore: WithLogger(nil)")
	}
	return func(s *Store) { s.logger = l }
}

// Store is a [store.Store] on Redis. It is safe for concurrent use. Close it
// when done: it returns unused leased tokens and stops its background
// goroutine.
type Store struct {
	client        redis.UniversalClient
	prefix        string
	timeout       time.Duration
	idleTTL       time.Duration
	leaseWindow   time.Duration
	maxLease      float64
	mode          FailureMode
	share         float64
	probeInterval time.Duration
	logger        *slog.Logger

	// fallback paces the keys of shards that are down. It is never replaced:
	// its buckets (one per key) carry over from one outage to the next, so a
	// shard that flaps does not hand out a fresh burst at each failure.
	fallback *store.Memory

	single   *shard      // the only shard of a client without shards; nil for a cluster
	unrouted *shard      // a cluster's keys until its slot map is loaded; nil otherwise
	routed   atomic.Bool // a cluster client's slot map is loaded

	mu      sync.Mutex
	keys    map[string]*keyState
	refunds map[string]giveBack    // tokens to return, per key
	updates map[string]store.State // publishes not yet sent, per key
	shards  map[string]*shard      // by address
	routing chan struct{}          // closed when the slot map load in flight ends
	closed  bool

	flushMu sync.Mutex // one drain of refunds and updates at a time
	wake    chan struct{}
	quit    chan struct{}
	wg      sync.WaitGroup

	calls, reservations, leased, fallbacks, failures, outages atomic.Int64
}

var _ store.Store = (*Store)(nil)

// New returns a Store on client: a *redis.Client, a *redis.ClusterClient
// (health per master), or any other UniversalClient (one health for all
// keys). It talks to Redis only when used; the client stays owned by the
// caller (Close does not close it).
func New(client redis.UniversalClient, opts ...Option) *Store {
	if client == nil {
		panic("redisstore: New(nil client)")
	}
	s := &Store{
		client:        client,
		prefix:        DefaultPrefix,
		timeout:       DefaultTimeout,
		idleTTL:       store.DefaultIdleTTL,
		leaseWindow:   DefaultLeaseWindow,
		maxLease:      DefaultMaxLease,
		share:         1,
		probeInterval: DefaultProbeInterval,
		logger:        slog.Default(),
		keys:          make(map[string]*keyState),
		refunds:       make(map[string]giveBack),
		updates:       make(map[string]store.State),
		shards:        make(map[string]*shard),
		fallback:      store.NewMemory(),
		wake:          make(chan struct{}, 1),
		quit:          make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	switch c := client.(type) {
	case *redis.ClusterClient:
		s.unrouted = newShard("", nil)
		s.shards[""] = s.unrouted
	case *redis.Client:
		s.single = newShard(c.Options().Addr, c)
		s.shards[s.single.addr] = s.single
	default: // Ring, or a client of the caller's own: probed through itself
		s.single = newShard("", nil)
		s.shards[""] = s.single
	}
	s.wg.Add(1)
	go s.loop()
	return s
}

// Stats counts what a Store did since New.
type Stats struct {
	Reservations int64    // Reserve calls answered (granted or refused)
	Calls        int64    // Redis script calls: reservations, leases, refunds, publishes and probes alike
	Leased       int64    // reservations served from a local lease, without a Redis call
	Fallbacks    int64    // reservations served by the local fallback limiter
	Failures     int64    // Redis calls that failed, and connection checks a master refused
	Outages      int64    // times a shard (the one Redis, or a cluster master) was found down
	Down         bool     // some shard is considered unreachable now
	DownShards   []string // their addresses, sorted ("": a cluster's slot map could not be loaded)
	Held         float64  // tokens booked in leases and not handed out yet
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	var down []string
	for _, sh := range s.shards {
		if sh.down {
			down = append(down, sh.addr)
		}
	}
	slices.Sort(down)
	keys := make([]*keyState, 0, len(s.keys))
	for _, ks := range s.keys {
		keys = append(keys, ks)
	}
	s.mu.Unlock()
	held := 0.0
	for _, ks := range keys {
		ks.mu.Lock()
		held += max(ks.lease.left(), 0)
		ks.mu.Unlock()
	}
	return Stats{
		Held:         held,
		Reservations: s.reservations.Load(),
		Calls:        s.calls.Load(),
		Leased:       s.leased.Load(),
		Fallbacks:    s.fallbacks.Load(),
		Failures:     s.failures.Load(),
		Outages:      s.outages.Load(),
		Down:         len(down) > 0,
		DownShards:   down,
	}
}

// Reserve implements [store.Store].
func (s *Store) Reserve(ctx context.Context, key string, r store.Request) (store.Grant, error) {
	if err := ctx.Err(); err != nil {
		return store.Grant{}, err
	}
	if !(r.Limit > 0) {
		return store.Grant{}, fmt.Errorf("redisstore: reservation needs a limit > 0, got %v", float64(r.Limit))
	}
	if !(r.Tokens > 0) || math.IsInf(r.Tokens, 0) {
		r.Tokens = 0
	}
	r.Burst = max(r.Burst, 1)
	maxWait := time.Duration(-1)
	if r.MaxWait > 0 {
		maxWait = r.MaxWait
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := max(time.Until(dl), 0); maxWait < 0 || left < maxWait {
			maxWait = left
		}
	}
	g, err := s.reserve(ctx, key, r, maxWait)
	if err == nil {
		s.reservations.Add(1)
	}
	return g, err
}

// Cancel implements [store.Store]: the tokens go back to Redis in the
// background, together with other returns for the same key.
func (s *Store) Cancel(key string, r store.Request) {
	if !(r.Tokens > 0) || math.IsInf(r.Tokens, 0) {
		return
	}
	sh := s.shardOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if sh.down {
		s.fallback.Cancel(key, s.scaled(r))
		return
	}
	s.giveBackLocked(key, giveBack{tokens: r.Tokens, secs: r.Tokens * intervalOf(r.Limit)})
}

// giveBackLocked queues tokens to return to key's bucket; s.mu is held.
func (s *Store) giveBackLocked(key string, g giveBack) {
	if g.tokens <= 0 {
		return
	}
	r := s.refunds[key]
	r.merge(g)
	s.refunds[key] = r
	s.signal()
}

// intervalOf is seconds per token at limit; 0 for store.Unlimited (and +Inf).
func intervalOf(limit float64) float64 {
	if limit >= store.Unlimited || !(limit > 0) {
		return 0
	}
	return 1 / limit
}

// Publish implements [store.Store]. The update applies to this process at
// once and reaches Redis in the background, moments later; updates made
// while the key's shard is unreachable stay local.
func (s *Store) Publish(ctx context.Context, key string, st store.State) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !(st.Limit > 0) {
		st.Limit, st.Burst = 0, 0
	}
	st.Burst = max(st.Burst, 1)
	st.Pause = max(st.Pause, 0)
	if st.Limit == 0 && st.Pause == 0 {
		return nil
	}
	ks := s.keyState(key)
	remnant := ks.learn(time.Now(), st)
	sh := s.shardOf(key)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	_ = s.fallback.Publish(ctx, key, st)
	if sh.down {
		ks.sent()
		return nil
	}
	s.giveBackLocked(key, remnant)
	u := s.updates[key]
	if st.Limit > 0 {
		u.Limit, u.Burst = st.Limit, st.Burst
	}
	u.Pause = max(u.Pause, st.Pause)
	s.updates[key] = u
	s.signal()
	return nil
}

// Flush sends pending refunds and publishes to Redis and returns when they
// are applied, or with the first error.
func (s *Store) Flush(ctx context.Context) error {
	return s.drain(ctx)
}

// Close returns the unused tokens of every lease to Redis, sends pending
// updates, and stops the store's background goroutine. It waits for Redis
// calls in flight, which the client's own timeouts bound. Calls after Close
// fail with [ErrClosed]. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.quit)
	keys := make(map[string]*keyState, len(s.keys))
	for k, ks := range s.keys {
		keys[k] = ks
	}
	s.mu.Unlock()
	s.wg.Wait()

	for key, ks := range keys {
		g := ks.dropLease()
		s.mu.Lock()
		s.giveBackLocked(key, g)
		s.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout*4)
	defer cancel()
	return s.drain(ctx)
}

// reserveRedis books b for key with one script call, on a goroutine of its
// own so that the caller can leave when ctx ends, or when the key's shard is
// found down meanwhile, even if the client ignores contexts (go-redis does
// unless ContextTimeoutEnabled). If the caller left and tokens were booked,
// they are returned.
func (s *Store) reserveRedis(ctx context.Context, h health, key string, b booking) (reply, time.Time, error) {
	const (
		pending = iota
		left    // the caller left: the call undoes its own booking
		settled // the call ended first: a caller that leaves undoes it
	)
	var (
		res   reply
		at    time.Time
		err   error
		done  = make(chan struct{})
		state atomic.Int32
	)
	booked := func() bool { return err == nil && res.ok && b.tokens > 0 && b.interval > 0 }
	if !s.goAsync(func() {
		opCtx, cancel := context.WithTimeout(context.Background(), s.timeout)
		res, err = s.runReserve(opCtx, s.client, h.sh.addr, key, b)
		cancel()
		at = time.Now()
		if err != nil {
			s.failed(h, key, err)
		}
		if !state.CompareAndSwap(pending, settled) && booked() {
			s.undo(key, h.sh, b)
		}
		close(done)
	}) {
		return reply{}, time.Time{}, ErrClosed
	}
	if werr := s.await(ctx, h, key, done); werr != nil {
		if !state.CompareAndSwap(pending, left) {
			<-done // settled: the result is ours to undo
			if booked() {
				s.undo(key, h.sh, b)
			}
		}
		return reply{}, time.Time{}, werr
	}
	return res, at, err
}

// undo returns the tokens of a booking nobody will use.
func (s *Store) undo(key string, sh *shard, b booking) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && !sh.down {
		s.giveBackLocked(key, giveBack{tokens: b.tokens, secs: b.tokens * b.interval})
	}
}

// goAsync runs fn on a goroutine that Close waits for; false once closed.
func (s *Store) goAsync(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Go(fn)
	return true
}

// degraded answers a reservation whose shard is unreachable, or whose call
// failed with cause.
func (s *Store) degraded(ctx context.Context, key string, r store.Request, sh *shard, cause error) (store.Grant, error) {
	s.mu.Lock()
	closed, probeAt := s.closed, sh.probeAt
	if cause == nil {
		cause = sh.cause
	}
	s.mu.Unlock()
	if closed {
		return store.Grant{}, ErrClosed
	}
	if s.mode == FailClosed {
		if cause == nil {
			cause = &ShardError{Shard: sh.addr, Err: errors.New("unreachable")}
		}
		if !probeAt.After(time.Now()) {
			probeAt = time.Now().Add(s.probeInterval)
		}
		return store.Grant{}, &pacer.RateLimitError{Endpoint: key, RetryAt: probeAt, Err: cause}
	}
	s.fallbacks.Add(1)
	return s.fallback.Reserve(ctx, key, s.scaled(r))
}

func (s *Store) scaled(r store.Request) store.Request {
	if s.share < 1 && r.Limit < store.Unlimited {
		r.Limit *= s.share
		r.Burst = max(1, int(float64(r.Burst)*s.share))
	}
	return r
}

// signal wakes the background loop; s.mu or not, it never blocks.
func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
