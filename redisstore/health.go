package redisstore

import (
	"context"
	"time"

	"github.com/pacer-go/pacer"
)

// loop is the store's background goroutine: it returns expired leases, sends
// refunds and publishes, and probes Redis while it is unreachable.
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
// (zero: only when woken).
func (s *Store) maintain() time.Time {
	now := time.Now()
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}

	s.mu.Lock()
	down, probeAt := s.down, s.probeAt
	keys := make(map[string]*keyState, len(s.keys))
	for k, ks := range s.keys {
		keys[k] = ks
	}
	s.mu.Unlock()

	if down {
		if now.Before(probeAt) {
			return probeAt
		}
		if !s.probe() {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.probeAt
		}
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
	if err := s.drain(ctx); err != nil {
		s.mu.Lock()
		earliest(s.probeAt)
		s.mu.Unlock()
	}
	return next
}

// drain sends pending refunds and publishes, one script call per key, and
// stops at the first failure (what is left is dropped: Redis is down, and the
// fallback already has the publishes).
func (s *Store) drain(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		return nil
	}
	refunds, updates := s.refunds, s.updates
	s.refunds = make(map[string]giveBack)
	s.updates = make(map[string]pacer.SharedState)
	s.mu.Unlock()

	var failed error
	for key, st := range updates {
		if failed == nil {
			if err := s.runPublish(ctx, key, st); err != nil {
				failed = err
			}
		}
		s.mu.Lock()
		ks := s.keys[key]
		s.mu.Unlock()
		if ks != nil {
			ks.sent()
		}
	}
	for key, g := range refunds {
		if failed != nil {
			break
		}
		if _, err := s.runReserve(ctx, key, booking{refund: g, maxWait: -1}); err != nil {
			failed = err
		}
	}
	if failed != nil && ctx.Err() == nil {
		s.failed(failed)
	}
	return failed
}

// takeRefund removes the pending refund of key, for a call that carries it.
func (s *Store) takeRefund(key string) giveBack {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.refunds[key]
	delete(s.refunds, key)
	return g
}

// failed records a failed Redis call: the first failure of an outage marks
// Redis unreachable, warns, and schedules a probe.
func (s *Store) failed(err error) {
	s.failures.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down || s.closed {
		return
	}
	s.down = true
	s.probeAt = time.Now().Add(s.probeInterval)
	// Leases stay valid (they are bookings); new traffic goes to the
	// fallback, which starts from a clean state.
	s.fallback = pacer.NewMemoryStore()
	msg := "pacing each process on its own"
	if s.mode == FailClosed {
		msg = "refusing requests"
	}
	s.logger.Warn("redisstore: Redis unreachable, "+msg+" until it answers again",
		"error", err, "mode", s.mode.String(), "retry_in", s.probeInterval)
	s.signal()
}

// probe pings Redis; on success the store uses it again.
func (s *Store) probe() bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	err := s.client.Ping(ctx).Err()
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.probeAt = time.Now().Add(s.probeInterval)
		return false
	}
	if s.down {
		s.down = false
		s.refunds = make(map[string]giveBack) // bookings made before the outage may be gone
		s.logger.Info("redisstore: Redis reachable again, sharing quotas")
	}
	return true
}

func (s *Store) isDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}
