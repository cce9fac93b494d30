package apisim

import (
	"fmt"
	"math"
	"time"
)

// limitHistory records a quota's limit over time (offsets from the server's
// start), so Capacity can integrate it. The first entry is at offset 0.
type limitHistory []limitChange

type limitChange struct {
	at    time.Duration // from when the limit counts
	limit float64
}

// record appends a change effective at at; changes already pending at or
// after at are superseded (several SetLimit calls in one fixed window leave
// only the last).
func (h *limitHistory) record(at time.Duration, limit float64) {
	for len(*h) > 1 && (*h)[len(*h)-1].at >= at {
		*h = (*h)[:len(*h)-1]
	}
	if last := &(*h)[len(*h)-1]; last.at >= at {
		*last = limitChange{at, limit}
		return
	}
	*h = append(*h, limitChange{at, limit})
}

// integral is the quota available in [lo, hi) at limit per window.
func (h limitHistory) integral(lo, hi, window time.Duration) float64 {
	total := 0.0
	for i, c := range h {
		end := time.Duration(math.MaxInt64)
		if i+1 < len(h) {
			end = h[i+1].at
		}
		if a, z := max(lo, c.at), min(hi, end); z > a {
			total += c.limit * float64(z-a) / float64(window)
		}
	}
	return total
}

// SetLimit changes the shared bucket's request quota per Window (n > 0) mid-run:
// from the next window for FixedWindow (a window's quota is fixed when it
// opens), at once for SlidingWindow and TokenBucket (a TokenBucket with Burst 0
// also shrinks its capacity to n). It panics if n ≤ 0. Route buckets keep
// their limits; see SetRouteLimit.
func (s *Server) SetLimit(n int) {
	if n <= 0 {
		panic(fmt.Sprintf("apisim: invalid SetLimit %d: must be > 0", n))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLimitLocked(s.shared, n)
}

// SetRouteLimit is SetLimit for the bucket of the route with this prefix (a
// key of Config.Routes). It panics on an unknown prefix or n ≤ 0.
func (s *Server) SetRouteLimit(prefix string, n int) {
	if n <= 0 {
		panic(fmt.Sprintf("apisim: invalid SetRouteLimit %d: must be > 0", n))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.routes {
		if b.prefix == prefix {
			s.setLimitLocked(b, n)
			return
		}
	}
	panic(fmt.Sprintf("apisim: invalid SetRouteLimit prefix %q: not in Config.Routes", prefix))
}

// SetTokenLimit changes the token quota per Window (n > 0) of every bucket,
// with the same timing as SetLimit. It panics if n ≤ 0 or the server was
// configured without a TokenLimit.
func (s *Server) SetTokenLimit(n int) {
	if n <= 0 {
		panic(fmt.Sprintf("apisim: invalid SetTokenLimit %d: must be > 0", n))
	}
	if s.cfg.TokenLimit == 0 {
		panic("apisim: invalid SetTokenLimit: Config.TokenLimit is 0 (no token quota)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, _ := s.now()
	for _, b := range s.buckets() {
		s.runUnseen(b, t) // the unseen client's past requests ran at the old limit
		tq := b.toks[totalTokens]
		tq.limits.record(tq.q.setLimit(t, float64(n)), float64(n))
	}
}

func (s *Server) setLimitLocked(b *bucket, n int) {
	t, _ := s.now()
	s.runUnseen(b, t)
	b.reqLimits.record(b.req.setLimit(t, float64(n)), float64(n))
}

// Capacity is how many requests the visible client could have had admitted in
// [from, to): the request rate Limit/Window of each bucket that served at least
// one visible request (following SetLimit from when each change took effect),
// minus the unseen client's share, integrated over the interval. It is the
// long-run rate: the burst a fresh quota allows at start is not included, so a
// client that spends it can exceed Capacity over short runs. The token quota
// is not considered; see TokenCapacity.
func (s *Server) Capacity(from, to time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0.0
	for _, b := range s.buckets() {
		if b.used {
			total += s.integral(b.reqLimits, from, to)
		}
	}
	return total
}

// BucketCapacity is Capacity for one bucket (an Event.Key), whether the client
// used it or not; 0 for an unknown key.
func (s *Server) BucketCapacity(key string, from, to time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.bucketNamed(key); b != nil {
		return s.integral(b.reqLimits, from, to)
	}
	return 0
}

// TokenCapacity is Capacity for the token quota: the tokens the visible client
// could have used in [from, to) across the buckets it used; 0 without a
// token quota.
func (s *Server) TokenCapacity(from, to time.Time) float64 {
	return s.tokenCapacity(totalTokens, from, to)
}

// InputTokenCapacity and OutputTokenCapacity are TokenCapacity for the input
// and output token quotas.
func (s *Server) InputTokenCapacity(from, to time.Time) float64 {
	return s.tokenCapacity(inputTokens, from, to)
}

// OutputTokenCapacity: see InputTokenCapacity.
func (s *Server) OutputTokenCapacity(from, to time.Time) float64 {
	return s.tokenCapacity(outputTokens, from, to)
}

func (s *Server) tokenCapacity(k tokenKind, from, to time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0.0
	for _, b := range s.buckets() {
		if b.used && b.toks[k] != nil {
			total += s.integral(b.toks[k].limits, from, to)
		}
	}
	return total
}

func (s *Server) integral(h limitHistory, from, to time.Time) float64 {
	lo, hi := max(0, from.Sub(s.start)), to.Sub(s.start)
	return h.integral(lo, hi, s.cfg.Window) * (1 - s.cfg.UnseenShare)
}
