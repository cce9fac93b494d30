package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/redisstore"
	"github.com/pacer-go/pacer/redisstore/internal/redistest"
	"github.com/pacer-go/pacer/store"
)

// logBuffer collects log output from concurrent goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// slack is how much later than its context's deadline a call may return on
// a loaded test machine.
const slack = 300 * time.Millisecond

func TestRedisOutage(t *testing.T) {
	for _, mode := range []redisstore.FailureMode{redisstore.FailOpen, redisstore.FailClosed} {
		for _, outage := range []string{"Killed", "Frozen"} {
			for _, window := range []time.Duration{0, redisstore.DefaultLeaseWindow} {
				name := mode.String() + "/" + outage + "/Unleased"
				if window > 0 {
					name = mode.String() + "/" + outage + "/Leased"
				}
				t.Run(name, func(t *testing.T) {
					testOutage(t, mode, outage, window)
				})
			}
		}
	}
}

// testOutage runs reservations from several goroutines, each under a 1 s
// context, while Redis dies (or stalls) and comes back: no call outlives its
// context, the failure mode decides the answers, one warning is logged, and
// the store recovers by itself. The Redis timeout is 500 ms so that a loaded
// test machine does not cause outages of its own.
func testOutage(t *testing.T, mode redisstore.FailureMode, outage string, window time.Duration) {
	srv := redistest.Start(t)
	logs := &logBuffer{}
	s := redisstore.New(srv.Client(t),
		redisstore.WithPrefix(uniquePrefix()),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		redisstore.WithFailureMode(mode),
		redisstore.WithTimeout(500*time.Millisecond),
		redisstore.WithProbeInterval(50*time.Millisecond),
		redisstore.WithLeaseWindow(window),
	)
	defer func() { require.NoError(t, s.Close()) }()
	r := store.Request{Tokens: 1, Limit: 5000, Burst: 100}

	var (
		stop                      atomic.Bool
		granted, refused, ctxErrs atomic.Int64
		worst                     atomic.Int64
		wg                        sync.WaitGroup
		unexpectedMu              sync.Mutex
		unexpected                []error
	)
	const perCall = time.Second
	for range 6 {
		wg.Go(func() {
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), perCall)
				start := time.Now()
				g, err := s.Reserve(ctx, "k", r)
				took := time.Since(start)
				cancel()
				if int64(took) > worst.Load() {
					worst.Store(int64(took))
				}
				var rle *pacer.RateLimitError
				switch {
				case err == nil && g.OK:
					granted.Add(1)
				case errors.As(err, &rle) && rle.Err != nil && rle.Endpoint == "k":
					refused.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					ctxErrs.Add(1)
				default:
					unexpectedMu.Lock()
					unexpected = append(unexpected, err)
					unexpectedMu.Unlock()
				}
				time.Sleep(time.Millisecond) // about 6000 reservations per second in all
			}
		})
	}
	phase := func(d time.Duration) { time.Sleep(d) } // the workload runs meanwhile

	require.Eventually(t, func() bool { return granted.Load() >= 50 }, 10*time.Second, time.Millisecond,
		"reservations succeed while Redis is up")
	require.False(t, s.Stats().Down)
	before := granted.Load()

	if outage == "Killed" {
		srv.Kill()
	} else {
		srv.Freeze()
	}
	phase(800 * time.Millisecond)
	st := s.Stats()
	assert.True(t, st.Down, "the outage was noticed")
	switch mode {
	case redisstore.FailOpen:
		assert.Greater(t, granted.Load(), before, "fail-open keeps granting")
		assert.Positive(t, st.Fallbacks)
		assert.Zero(t, refused.Load())
	case redisstore.FailClosed:
		assert.Positive(t, refused.Load(), "fail-closed refuses with *pacer.RateLimitError")
		assert.Zero(t, st.Fallbacks)
	}

	if outage == "Killed" {
		srv.Restart()
	} else {
		srv.Thaw()
	}
	require.Eventually(t, func() bool { return !s.Stats().Down }, 5*time.Second, 10*time.Millisecond, "recovery")
	calls := s.Stats().Calls
	phase(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	assert.Greater(t, s.Stats().Calls, calls, "Redis is used again")
	assert.Empty(t, unexpected)
	assert.LessOrEqual(t, time.Duration(worst.Load()), perCall+slack, "no call outlives its context")
	assert.Equal(t, 1, logs.count("level=WARN"), "one warning per outage:\n%s", logs.buf.String())
	assert.Equal(t, 1, logs.count("reachable again"))
	t.Logf("granted %d, refused %d, context ended %d, worst call %v, stats %+v",
		granted.Load(), refused.Load(), ctxErrs.Load(), time.Duration(worst.Load()), s.Stats())
}

func TestFailOpenPacesEachProcessAtItsShare(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()), redisstore.WithFallbackShare(0.5),
		redisstore.WithTimeout(200*time.Millisecond), redisstore.WithProbeInterval(time.Hour))
	srv.Kill()
	ctx := context.Background()
	r := store.Request{Tokens: 1, Limit: 10, Burst: 4}
	var delays []time.Duration
	for range 4 {
		g, err := s.Reserve(ctx, "k", r)
		require.NoError(t, err)
		delays = append(delays, g.Delay)
	}
	// Half of 10 per second with half the burst: 2 at once, then every 200 ms.
	assert.Zero(t, delays[0])
	assert.Zero(t, delays[1])
	assert.InDelta(t, 0.2, delays[2].Seconds(), 0.05)
	assert.InDelta(t, 0.4, delays[3].Seconds(), 0.05)
	assert.True(t, s.Stats().Down)
}

func TestCallsHonourTheContextEvenWhenTheClientIgnoresIt(t *testing.T) {
	// go-redis ignores context deadlines unless ContextTimeoutEnabled; the
	// store must not, or a stalled Redis would hold requests for the
	// client's 3 s read timeout.
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	for _, window := range []time.Duration{0, redisstore.DefaultLeaseWindow} {
		s := redisstore.New(c, redisstore.WithPrefix(uniquePrefix()), redisstore.WithLogger(quiet),
			redisstore.WithTimeout(10*time.Second), redisstore.WithLeaseWindow(window))
		r := store.Request{Tokens: 1, Limit: 100, Burst: 10}
		_, err := s.Reserve(context.Background(), "k", r)
		require.NoError(t, err)

		srv.Freeze()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		_, err = s.Reserve(ctx, "k", store.Request{Tokens: 1, Limit: 200, Burst: 10})
		took := time.Since(start)
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, took, 100*time.Millisecond+slack)
		srv.Thaw()
		require.NoError(t, s.Close()) // waits for the call left behind
	}
}

func TestFailClosedErrorCarriesTheRedisError(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()), redisstore.WithFailureMode(redisstore.FailClosed),
		redisstore.WithTimeout(200*time.Millisecond), redisstore.WithProbeInterval(time.Hour))
	srv.Kill()
	before := time.Now()
	_, err := s.Reserve(context.Background(), "https://api.example.com", store.Request{Tokens: 1, Limit: 1, Burst: 1})
	var rle *pacer.RateLimitError
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, "https://api.example.com", rle.Endpoint)
	require.Error(t, rle.Err)
	assert.Contains(t, rle.Err.Error(), "redisstore: ")
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "a slow Redis is not the caller's deadline")
	assert.WithinDuration(t, before.Add(time.Hour), rle.RetryAt, time.Minute, "RetryAt is the next probe")

	// While Redis is known to be down, refusals come at once, without a call.
	calls := s.Stats().Calls
	_, err = s.Reserve(context.Background(), "https://api.example.com", store.Request{Tokens: 1, Limit: 1, Burst: 1})
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, calls, s.Stats().Calls)
}

func TestOptionsPanicOnInvalidValues(t *testing.T) {
	for name, fn := range map[string]func(){
		"WithTimeout(0)":         func() { redisstore.WithTimeout(0) },
		"WithIdleTTL(0)":         func() { redisstore.WithIdleTTL(0) },
		"WithLeaseWindow(-1ns)":  func() { redisstore.WithLeaseWindow(-1) },
		"WithMaxLease(0)":        func() { redisstore.WithMaxLease(0) },
		"WithFailureMode(7)":     func() { redisstore.WithFailureMode(7) },
		"WithFallbackShare(0)":   func() { redisstore.WithFallbackShare(0) },
		"WithFallbackShare(1.5)": func() { redisstore.WithFallbackShare(1.5) },
		"WithProbeInterval(-1s)": func() { redisstore.WithProbeInterval(-time.Second) },
		"WithLogger(nil)":        func() { redisstore.WithLogger(nil) },
		"New(nil)":               func() { redisstore.New(nil) },
	} {
		assert.PanicsWithValue(t, panicValue(fn), fn, name)
		assert.Contains(t, panicValue(fn), strings.SplitN(name, "(", 2)[0], "the message names the option")
	}
}

func panicValue(fn func()) (msg string) {
	defer func() { msg, _ = recover().(string) }()
	fn()
	return ""
}

func TestClosedStoreRefusesWork(t *testing.T) {
	srv := redistest.Start(t)
	s := redisstore.New(srv.Client(t), redisstore.WithLogger(quiet))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "idempotent")
	_, err := s.Reserve(context.Background(), "k", store.Request{Tokens: 1, Limit: 1, Burst: 1})
	assert.ErrorIs(t, err, redisstore.ErrClosed)
	assert.ErrorIs(t, s.Publish(context.Background(), "k", store.State{Pause: time.Second}), redisstore.ErrClosed)
	s.Cancel("k", store.Request{Tokens: 1, Limit: 1, Burst: 1}) // no-op, no panic
}

// TestErrorsSayWhatHappened checks the kind of each failure: a dead Redis
// refuses connections (noticed within milliseconds, not after the timeout or
// the client's 5 dials 100 ms apart), a stalled one does not answer in time,
// and a master asked about a slot it does not own redirects.
func TestErrorsSayWhatHappened(t *testing.T) {
	r := store.Request{Tokens: 1, Limit: 1, Burst: 1}
	reserve := func(t *testing.T, s *redisstore.Store, key string) (*redisstore.ShardError, time.Duration) {
		t.Helper()
		start := time.Now()
		_, err := s.Reserve(context.Background(), key, r)
		took := time.Since(start)
		var rle *pacer.RateLimitError
		require.ErrorAs(t, err, &rle)
		var se *redisstore.ShardError
		require.ErrorAs(t, rle.Err, &se)
		return se, took
	}
	t.Run("Refused", func(t *testing.T) {
		srv := redistest.Start(t)
		s := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()), redisstore.WithFailureMode(redisstore.FailClosed),
			redisstore.WithTimeout(time.Second), redisstore.WithProbeInterval(time.Hour))
		srv.Kill()
		se, took := reserve(t, s, "k")
		assert.ErrorIs(t, se, redisstore.ErrRefused)
		assert.Equal(t, srv.Addr, se.Shard)
		assert.Less(t, took, 250*time.Millisecond, "a refused connection fails fast, not after the 1 s timeout")
		assert.Contains(t, se.Error(), "connection refused")
	})
	t.Run("Timeout", func(t *testing.T) {
		srv := redistest.Start(t)
		s := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()), redisstore.WithFailureMode(redisstore.FailClosed),
			redisstore.WithTimeout(200*time.Millisecond), redisstore.WithProbeInterval(time.Hour))
		srv.Freeze()
		defer srv.Thaw()
		se, took := reserve(t, s, "k")
		assert.ErrorIs(t, se, redisstore.ErrTimeout)
		assert.NotErrorIs(t, se, context.DeadlineExceeded, "a slow Redis is not the caller's deadline")
		assert.GreaterOrEqual(t, took, 200*time.Millisecond)
		srv.Thaw()
	})
	t.Run("Redirected", func(t *testing.T) {
		c := redistest.StartCluster(t, 3)
		cc := c.Client(t)
		prefix := uniquePrefix()
		// A plain client on the master that does not own the key's slot: it
		// answers MOVED, and follows no redirection.
		other := c.Nodes[0]
		if masterOf(t, cc, prefix+"k") == other.Addr {
			other = c.Nodes[1]
		}
		s := newStore(t, &redistest.Server{Addr: other.Addr}, redisstore.WithPrefix(prefix),
			redisstore.WithFailureMode(redisstore.FailClosed), redisstore.WithLeaseWindow(0))
		se, _ := reserve(t, s, "k")
		assert.ErrorIs(t, se, redisstore.ErrRedirected)
		assert.Contains(t, se.Error(), "MOVED")
		assert.False(t, s.Stats().Down, "a redirection says nothing about the master's health")
	})
}

// TestFallbackKeepsItsStateAcrossOutages: a Redis that flaps must not hand
// out the fallback's full burst at each failure. At 0.5 tokens per second
// with a burst of 4, the first outage spends the burst; the second, a moment
// later, finds it still spent.
func TestFallbackKeepsItsStateAcrossOutages(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, redisstore.WithPrefix(uniquePrefix()), redisstore.WithTimeout(time.Second),
		redisstore.WithProbeInterval(20*time.Millisecond))
	r := store.Request{Tokens: 1, Limit: 0.5, Burst: 4}
	immediate := func() int {
		n := 0
		for range 4 {
			g, err := s.Reserve(context.Background(), "k", r)
			require.NoError(t, err)
			if g.OK && g.Delay == 0 {
				n++
			}
		}
		return n
	}
	srv.Kill()
	first := time.Now()
	assert.Equal(t, 4, immediate(), "the first outage starts with the full burst")
	require.True(t, s.Stats().Down)
	srv.Restart()
	require.Eventually(t, func() bool { return !s.Stats().Down }, 5*time.Second, 5*time.Millisecond)
	srv.Kill()
	n := immediate()
	allowed := int(time.Since(first).Seconds()*0.5) + 1 // refilled since the first outage, rounded up
	assert.LessOrEqual(t, n, allowed, "the second outage finds the burst spent")
	assert.EqualValues(t, 2, s.Stats().Outages)
}
