package redisstore

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pacer-go/pacer/store"
)

// loop is the store's background goroutine: it returns expired leases, sends
// refunds and publishes, and probes shards that are down.
func (s *Store) loop() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := s.maintain()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-s.quit:
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// maintain does one round of background work and says when the next is due
// (zero: only when woken): it starts the probes of shards that are down,
// returns expired leases, and sends refunds and publishes.
func (s *Store) maintain() time.Time {
	now := time.Now()
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}

	s.mu.Lock()
	var due []*shard
	for _, sh := range s.shards {
		switch {
		case !sh.down || sh.probing:
		case now.Before(sh.probeAt):
			earliest(sh.probeAt)
		default:
			sh.probing = true
			due = append(due, sh)
		}
	}
	keys := make(map[string]*keyState, len(s.keys))
	for k, ks := range s.keys {
		keys[k] = ks
	}
	s.mu.Unlock()
	for _, sh := range due {
		s.goAsync(func() { s.probe(sh) }) // each on its own: a master that hangs delays no other
	}

	if len(keys) > 0 {
		earliest(now.Add(keyIdle)) // forget idle keys even when nothing else happens
	}
	for key, ks := range keys {
		refund, deadline, forget := ks.expire(now, keyIdle)
		earliest(deadline)
		s.mu.Lock()
		s.giveBackLocked(key, refund)
		if forget && s.keys[key] == ks {
			delete(s.keys, key)
		}
		s.mu.Unlock()
	}

	ctx, cancel := context.WithTimeout(context.Background(), s.timeout*4)
	defer cancel()
	_ = s.drain(ctx) // a failure marks its shard down, which wakes the loop for the probe
	return next
}

// drain sends pending refunds and publishes, one script call per key, the
// shards in parallel. What belongs to a shard that is down is dropped (its
// bookings may be gone, and the fallback already has the publishes), and so
// is the rest of a shard's work after its first failure. It returns the
// first error.
func (s *Store) drain(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	refunds, updates := s.refunds, s.updates
	s.refunds = make(map[string]giveBack)
	s.updates = make(map[string]store.State)
	s.mu.Unlock()

	type work struct {
		h       health
		updates map[string]store.State
		refunds map[string]giveBack
	}
	byShard := make(map[*shard]*work)
	workOf := func(key string) *work {
		sh := s.shardOf(key)
		w := byShard[sh]
		if w == nil {
			w = &work{h: s.healthOf(sh), updates: make(map[string]store.State), refunds: make(map[string]giveBack)}
			byShard[sh] = w
		}
		if w.h.down {
			return nil
		}
		return w
	}
	for key, st := range updates {
		if w := workOf(key); w != nil {
			w.updates[key] = st
		} else {
			s.sent(key)
		}
	}
	for key, g := range refunds {
		if w := workOf(key); w != nil {
			w.refunds[key] = g
		}
	}

	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	for _, w := range byShard {
		if w.h.down || len(w.updates)+len(w.refunds) == 0 {
			continue
		}
		wg.Go(func() {
			if err := s.drainShard(ctx, w.h, w.updates, w.refunds); err != nil {
				errMu.Lock()
				firstErr = cmp.Or(firstErr, err)
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	return firstErr
}

// drainShard sends one shard's publishes and refunds, and stops at the first
// failure.
func (s *Store) drainShard(ctx context.Context, h health, updates map[string]store.State, refunds map[string]giveBack) error {
	var failed error
	var failedKey string
	for key, st := range updates {
		if failed == nil {
			if err := s.runPublish(ctx, h.sh.addr, key, st); err != nil {
				failed, failedKey = err, key
			}
		}
		s.sent(key)
	}
	for key, g := range refunds {
		if failed != nil {
			break
		}
		if _, err := s.runReserve(ctx, s.client, h.sh.addr, key, booking{refund: g, maxWait: -1}); err != nil {
			failed, failedKey = err, key
		}
	}
	if failed != nil && ctx.Err() == nil {
		s.failed(h, failedKey, failed)
	}
	return failed
}

// sent marks key's local publishes as delivered or given up on.
func (s *Store) sent(key string) {
	s.mu.Lock()
	ks := s.keys[key]
	s.mu.Unlock()
	if ks != nil {
		ks.sent()
	}
}

// takeRefund removes the pending refund of key, for a call that carries it.
func (s *Store) takeRefund(key string) giveBack {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.refunds[key]
	delete(s.refunds, key)
	return g
}

// failed records a failed Redis call on key, made while its shard was as h
// says. The first failure of an outage marks the shard down, warns, and
// schedules a probe; the shard's waiting calls give up at once. A failure
// from before the shard's last transition is stale and changes nothing, and
// a redirection (the slot is moving) says nothing about the master's health.
func (s *Store) failed(h health, key string, err error) {
	s.failures.Add(1)
	if errors.Is(err, ErrRedirected) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := h.sh
	if sh.down || sh.gen != h.gen || s.closed {
		return
	}
	sh.down = true
	sh.gen++
	sh.cause = err
	sh.probeKey = key
	sh.probeAt = time.Now().Add(s.probeInterval)
	close(sh.downCh)
	s.outages.Add(1)
	// Leases stay valid (they are bookings); new traffic on the shard's keys
	// goes to the fallback.
	msg := "pacing each process on its own"
	if s.mode == FailClosed {
		msg = "refusing requests"
	}
	s.logger.Warn("redisstore: Redis unreachable, "+msg+" for the keys on this shard until it answers again",
		"shard", sh.addr, "error", err, "mode", s.mode.String(), "retry_in", s.probeInterval)
	s.signal()
}

// probe asks a shard that is down whether it serves its keys again, and
// brings it back if so. It asks the master itself, on its own client (no
// redirection to another node), with a keyed command that writes: the
// reservation script booking nothing, on the key whose call failed. A PING
// would not do: a cluster client sends it to any node, and a node answers it
// even while it refuses keyed commands with CLUSTERDOWN.
func (s *Store) probe(sh *shard) {
	s.mu.Lock()
	gen, key, node := sh.gen, sh.probeKey, sh.node
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	movedTo, err := s.ask(ctx, sh, key, node)
	cancel()

	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.signal() // reschedules the next probe, or drains what waited for this one
	sh.probing = false
	if !sh.down || sh.gen != gen {
		return
	}
	if err != nil {
		sh.cause = err // refusals describe the present failure
		sh.probeAt = time.Now().Add(s.probeInterval)
		return
	}
	sh.down = false
	sh.gen++
	sh.downCh = make(chan struct{})
	sh.cause = nil
	if movedTo != "" {
		s.logger.Info("redisstore: the keys of this Redis shard have another master now, sharing quotas",
			"shard", sh.addr, "master", movedTo)
		return
	}
	s.logger.Info("redisstore: Redis reachable again, sharing quotas", "shard", sh.addr)
}

// ask is the probe's question to sh: a nil error means the shard serves its
// keys, or they have moved to another master (movedTo).
func (s *Store) ask(ctx context.Context, sh *shard, key string, node *redis.Client) (movedTo string, err error) {
	if sh == s.unrouted {
		return "", s.loadSlots(ctx)
	}
	if cur := s.shardOf(key); sh != s.single && cur != sh {
		// The key's slot has another master now (a replica took over, or it
		// was resharded): its keys have left this shard.
		return cur.addr, nil
	}
	var c redis.Scripter = s.client
	if node != nil {
		// A refused dial fails the probe at once, without the client's dial
		// retries.
		if err := s.dial(node.Options()); err != nil {
			s.reloadSlots()
			return "", err
		}
		c = node
	}
	_, err = s.runReserve(ctx, c, sh.addr, key, booking{maxWait: -1})
	if errors.Is(err, ErrRedirected) {
		return "", nil // the node answers, and the slot has moved on: the client follows it
	}
	if err != nil {
		s.reloadSlots()
	}
	return "", err
}

// reloadSlots has a cluster client reload its slot map in the background.
// A client reloads it by itself on MOVED or ASK answers, and otherwise only
// every 10 s; but while a master is down the store sends it nothing but
// probes, which would not learn of a replica that took over until then.
func (s *Store) reloadSlots() {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}
