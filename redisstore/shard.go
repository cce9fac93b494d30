package redisstore

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// refusedCheckAfter is how long a call may be pending before the store dials
// the key's master itself to see whether it refuses connections. Left to
// itself, go-redis reports a refused connection only after DialerRetries
// (default 5) dials DialerRetryTimeout (default 100 ms) apart, and a
// ClusterClient may then try again: a call to a dead master would take the
// store's whole timeout. A Redis round trip on loopback or a LAN takes well
// under a millisecond, so a call pending for 10 ms is worth one dial, which a
// host with nothing listening refuses at once.
const refusedCheckAfter = 10 * time.Millisecond

// dialCheckSpacing is the least time between two such dials to one master:
// a live but slow master gets at most 20 test connections a second.
const dialCheckSpacing = 50 * time.Millisecond

// shard is one Redis master as this process sees it: the keys whose slots it
// owns share its health, and only they fall back (or are refused) while it is
// down. A client without shards (*redis.Client, Ring, failover client) has
// one shard for all keys.
type shard struct {
	addr string // the master's host:port; "" for a cluster whose slot map is not loaded yet

	// Guarded by Store.mu.
	node     *redis.Client // the master's own client, to probe it directly; nil: probe through Store.client
	down     bool
	gen      uint64        // counts transitions; a failure from an older generation is stale
	downCh   chan struct{} // closed when the shard goes down, replaced when it comes back
	cause    error         // the failure that took it down, or the last probe's
	probeAt  time.Time
	probeKey string // unprefixed key of the call that failed: its slot is on this shard
	probing  bool
	dialing  bool      // a refused-connection check is in flight
	dialedAt time.Time // when the last one started
}

func newShard(addr string, node *redis.Client) *shard {
	return &shard{addr: addr, node: node, downCh: make(chan struct{})}
}

// health is a snapshot of a shard's state, taken before a call: the call's
// failure counts only if the shard is still in the same generation.
type health struct {
	sh      *shard
	gen     uint64
	down    bool
	downCh  <-chan struct{}
	cause   error
	probeAt time.Time
}

func (s *Store) healthOf(sh *shard) health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return health{sh: sh, gen: sh.gen, down: sh.down, downCh: sh.downCh, cause: sh.cause, probeAt: sh.probeAt}
}

// shardOf returns the shard of the master that owns key's slot. It makes no
// network call: a cluster client's slot map is loaded by route first (until
// then every key is on the unrouted shard).
func (s *Store) shardOf(key string) *shard {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return s.single
	}
	if !s.routed.Load() {
		return s.unrouted
	}
	// With the slot map loaded, MasterForKey reads it without a network call
	// (a map older than 10 s is reloaded in the background).
	node, err := cc.MasterForKey(context.Background(), s.prefix+key)
	if err != nil {
		return s.unrouted
	}
	addr := node.Options().Addr
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shards[addr]
	if sh == nil {
		sh = newShard(addr, node)
		s.shards[addr] = sh
	}
	sh.node = node // the client replaces a node's client when the node is forgotten and found again
	return sh
}

// route loads a cluster client's slot map before the store's first call:
// the client would load it on first use, with network calls that can ignore
// the caller's context. Concurrent callers share one attempt and leave when
// their context ends; a failed attempt marks the unrouted shard down, and its
// probe tries again.
func (s *Store) route(ctx context.Context) {
	if _, ok := s.client.(*redis.ClusterClient); !ok || s.routed.Load() {
		return
	}
	s.mu.Lock()
	if s.unrouted.down {
		s.mu.Unlock()
		return
	}
	a := s.routing
	if a == nil && !s.closed {
		a = make(chan struct{})
		s.routing = a
		h := health{sh: s.unrouted, gen: s.unrouted.gen}
		s.wg.Go(func() {
			opCtx, cancel := context.WithTimeout(context.Background(), s.timeout)
			err := s.loadSlots(opCtx)
			cancel()
			if err != nil {
				s.failed(h, "", err)
			}
			s.mu.Lock()
			s.routing = nil
			s.mu.Unlock()
			close(a)
		})
	}
	s.mu.Unlock()
	if a == nil {
		return // closed
	}
	select {
	case <-a:
	case <-ctx.Done():
	}
}

// loadSlots asks a cluster client for the master of one key, which loads
// its slot map.
func (s *Store) loadSlots(ctx context.Context) error {
	_, err := s.client.(*redis.ClusterClient).MasterForKey(ctx, s.prefix)
	if err != nil {
		return classify(ctx, "", err)
	}
	s.routed.Store(true)
	return nil
}

// await waits until done is closed (nil), ctx ends (its error), or the shard
// of h goes down (the failure that took it down). A call still pending after
// refusedCheckAfter has its master checked for refused connections, and
// again every dialCheckSpacing (a check made for another call moments before
// the master died proves nothing), so that a dead master is noticed at once
// rather than after the store's timeout.
func (s *Store) await(ctx context.Context, h health, key string, done <-chan struct{}) error {
	timer := time.NewTimer(min(refusedCheckAfter, s.timeout/4))
	defer timer.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-h.downCh:
			select {
			case <-done:
				return nil
			default:
			}
			return s.healthOf(h.sh).causeOr(errors.New("redisstore: Redis unreachable"))
		case <-timer.C:
			s.checkRefused(h, key)
			timer.Reset(dialCheckSpacing)
		}
	}
}

func (h health) causeOr(def error) error {
	if h.cause != nil {
		return h.cause
	}
	return def
}

// checkRefused dials the master of h in the background, unless a dial is in
// flight or was made moments ago; a refused dial marks the shard down.
func (s *Store) checkRefused(h health, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := h.sh
	if sh.node == nil || sh.down || sh.gen != h.gen || sh.dialing || time.Since(sh.dialedAt) < dialCheckSpacing || s.closed {
		return
	}
	sh.dialing, sh.dialedAt = true, time.Now()
	opt := sh.node.Options()
	s.wg.Go(func() {
		err := s.dial(opt)
		s.mu.Lock()
		sh.dialing = false
		s.mu.Unlock()
		if err != nil {
			s.failed(h, key, err)
		}
	})
}

// dial connects to a node's address and hangs up: an error (a *ShardError of
// kind ErrRefused) only when the connection is refused, so that a check
// never takes down a shard that merely answers slowly, or that the client
// reaches through a dialer of its own.
func (s *Store) dial(opt *redis.Options) error {
	d := net.Dialer{Timeout: s.timeout}
	conn, err := d.Dial(opt.Network, opt.Addr)
	if err == nil {
		_ = conn.Close()
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return &ShardError{Shard: opt.Addr, Kind: ErrRefused, Err: err}
	}
	return nil
}
