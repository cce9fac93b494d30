package redisstore_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/pacer-go/pacer/store/storetest"
)

// scriptCalls is a go-redis hook that counts the store's script calls that
// succeeded, per key: it tells a reservation answered by Redis from one the
// store answered locally.
type scriptCalls struct {
	mu sync.Mutex
	ok map[string]int
}

func newScriptCalls() *scriptCalls { return &scriptCalls{ok: make(map[string]int)} }

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); err == nil && (name == "evalsha" || name == "eval") && len(cmd.Args()) > 3 {
			if key, ok := cmd.Args()[3].(string); ok {
				h.mu.Lock()
				h.ok[key]++
				h.mu.Unlock()
			}
		}
		return err
	}
}

func (h *scriptCalls) count(keys []string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, k := range keys {
		n += h.ok[k]
	}
	return n
}

// masterOf returns the address of the master that owns key's slot.
func masterOf(t *testing.T, cc *redis.ClusterClient, key string) string {
	t.Helper()
	node, err := cc.MasterForKey(context.Background(), key)
	require.NoError(t, err)
	return node.Options().Addr
}

func TestClusterConformance(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	cc := c.Client(t)
	for _, mode := range []struct {
		name string
		opts []redisstore.Option
	}{
		{"Leased", nil},
		{"Unleased", []redisstore.Option{redisstore.WithLeaseWindow(0)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Peers {
				prefix := uniquePrefix()
				return func() store.Store {
					s := redisstore.New(cc, append([]redisstore.Option{redisstore.WithPrefix(prefix),
						redisstore.WithLogger(quiet), redisstore.WithTimeout(2 * time.Second)}, mode.opts...)...)
					t.Cleanup(func() { require.NoError(t, s.Close()) })
					return s
				}
			})
		})
	}
}

// outageCounts is what the calls on one class of keys (on live masters, or
// on the killed one) got during the outage.
type outageCounts struct {
	calls, granted, refused, ctxEnded, other atomic.Int64
}

// TestClusterMasterOutage kills one of three masters while 6 goroutines
// reserve on 48 keys spread over all of them, each call under a 150 ms
// context, and restarts it 2 s later. Keys on the live masters must keep
// using Redis: no refusal (fail-closed) and no fallback (fail-open), counted
// by a hook that sees every script call succeed. Keys on the killed master
// fall back or are refused. No call outlives its context by more than 50 ms,
// each store warns once per outage (no flapping), and recovers by itself.
func TestClusterMasterOutage(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	for _, mode := range []redisstore.FailureMode{redisstore.FailOpen, redisstore.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			testClusterOutage(t, c, mode)
		})
	}
}

func testClusterOutage(t *testing.T, c *redistest.Cluster, mode redisstore.FailureMode) {
	cc := c.Client(t)
	calls := newScriptCalls()
	cc.AddHook(calls)
	logs := &logBuffer{}
	prefix := uniquePrefix()
	s := redisstore.New(cc,
		redisstore.WithPrefix(prefix),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		redisstore.WithFailureMode(mode),
		redisstore.WithTimeout(500*time.Millisecond),
		redisstore.WithProbeInterval(50*time.Millisecond),
		redisstore.WithLeaseWindow(0), // one script call per reservation: the hook sees each
	)
	defer func() { require.NoError(t, s.Close()) }()

	victim := c.Nodes[0]
	var live, dead []string // keys, unprefixed
	for i := range 48 {
		key := fmt.Sprintf("k%d", i)
		if masterOf(t, cc, prefix+key) == victim.Addr {
			dead = append(dead, key)
		} else {
			live = append(live, key)
		}
	}
	require.NotEmpty(t, dead)
	require.NotEmpty(t, live)
	isDead := make(map[string]bool)
	for _, k := range dead {
		isDead[k] = true
	}
	prefixed := func(keys []string) []string {
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = prefix + k
		}
		return out
	}

	stalls := meterStalls(t)
	const perCall = 150 * time.Millisecond
	var (
		stop       atomic.Bool
		gate       sync.RWMutex // held for reading by each call: phases change between calls
		outage     bool
		counts     [2]outageCounts // [0] live keys, [1] keys on the killed master, during the outage
		worst      atomic.Int64    // longest time past its context of any call
		wg         sync.WaitGroup
		unexpected sync.Map
	)
	r := store.Request{Tokens: 1, Limit: 5000, Burst: 100}
	for g := range 6 {
		wg.Go(func() {
			for i := g; !stop.Load(); i++ {
				key := fmt.Sprintf("k%d", i%48)
				gate.RLock()
				ctx, cancel := context.WithTimeout(context.Background(), perCall)
				start := time.Now()
				gr, err := s.Reserve(ctx, key, r)
				over := time.Since(start) - perCall
				cancel()
				for old := worst.Load(); int64(over) > old && !worst.CompareAndSwap(old, int64(over)); old = worst.Load() {
				}
				var rle *pacer.RateLimitError
				cl := &outageCounts{}
				if outage {
					cl = &counts[0]
					if isDead[key] {
						cl = &counts[1]
					}
				}
				cl.calls.Add(1)
				switch {
				case err == nil && gr.OK:
					cl.granted.Add(1)
				case errors.As(err, &rle) && rle.Err != nil:
					cl.refused.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					cl.ctxEnded.Add(1)
				default:
					cl.other.Add(1)
					unexpected.Store(fmt.Sprint(err), true)
				}
				gate.RUnlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()

	require.Eventually(t, func() bool { return calls.count(prefixed(dead)) >= 20 && calls.count(prefixed(live)) >= 40 },
		10*time.Second, time.Millisecond, "reservations use Redis while the cluster is up")
	require.False(t, s.Stats().Down)

	// The master dies between calls (each holds the gate for reading): a
	// call counted as during the outage started after the process was
	// gone, so a grant on its keys is a fallback, never a reply of Redis
	// that raced the kill.
	gate.Lock()
	victim.Kill()
	liveBefore, fallbacksBefore := calls.count(prefixed(live)), s.Stats().Fallbacks
	outage = true
	gate.Unlock()
	time.Sleep(2 * time.Second) // the workload runs meanwhile
	gate.Lock()
	outage = false
	liveRedis, fallbacks := calls.count(prefixed(live))-liveBefore, s.Stats().Fallbacks-fallbacksBefore
	gate.Unlock()
	st := s.Stats()
	victim.Restart()
	c.WaitOK()

	deadBefore := calls.count(prefixed(dead))
	require.Eventually(t, func() bool { return !s.Stats().Down && calls.count(prefixed(dead)) > deadBefore+10 },
		10*time.Second, 10*time.Millisecond, "keys on the restarted master use Redis again")
	stop.Store(true)
	wg.Wait()

	lv, dd := &counts[0], &counts[1]
	// Every grant on a key of the killed master is a fallback: the rest are
	// on live keys.
	liveFallbacks := fallbacks - dd.granted.Load()
	t.Logf("%v, during the 2 s outage: live-shard keys: %d calls, %d through Redis, %d fallbacks, %d refused, "+
		"%d ended at their context; killed-shard keys: %d calls, %d granted, %d refused, %d ended at their context; "+
		"warnings %d, worst overrun past the context %v (worst stall of the machine %v); stats at the end of the outage %+v",
		mode, lv.calls.Load(), liveRedis, liveFallbacks, lv.refused.Load(), lv.ctxEnded.Load(),
		dd.calls.Load(), dd.granted.Load(), dd.refused.Load(), dd.ctxEnded.Load(),
		logs.count("level=WARN"), time.Duration(worst.Load()), stalls.worst(), st)
	unexpected.Range(func(k, _ any) bool { t.Errorf("unexpected error: %v", k); return true })

	assert.Zero(t, lv.refused.Load(), "no refusal on keys of live masters")
	assert.Zero(t, liveFallbacks, "no fallback on keys of live masters")
	assert.Zero(t, lv.other.Load())
	switch mode {
	case redisstore.FailOpen:
		assert.Positive(t, dd.granted.Load(), "keys on the killed master fall back")
		assert.Zero(t, dd.refused.Load())
	case redisstore.FailClosed:
		assert.Positive(t, dd.refused.Load(), "keys on the killed master are refused")
		assert.Zero(t, dd.granted.Load())
	}
	// A machine that stalls the test for longer stalls any code: the bound is
	// 50 ms past the worst stall of a goroutine that only sleeps.
	assert.LessOrEqual(t, time.Duration(worst.Load()), 50*time.Millisecond+stalls.worst(),
		"no call outlives its context by more than 50 ms (worst stall of the machine: %v)", stalls.worst())
	assert.Equal(t, 1, logs.count("level=WARN"), "one warning for the outage, no flapping:\n%s", logs.buf.String())
	assert.Equal(t, 1, strings.Count(logs.buf.String(), "reachable again"))
}

// stallMeter measures how late a goroutine that sleeps 1 ms at a time wakes
// up: on a loaded machine, the scheduler's stalls delay every call alike.
type stallMeter struct{ max atomic.Int64 }

func (m *stallMeter) worst() time.Duration { return time.Duration(m.max.Load()) }

// meterStalls runs a stallMeter until the test ends.
func meterStalls(t *testing.T) *stallMeter {
	m := &stallMeter{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			start := time.Now()
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			if late := int64(time.Since(start) - time.Millisecond); late > m.max.Load() {
				m.max.Store(late)
			}
		}
	})
	t.Cleanup(func() { close(done); wg.Wait() })
	return m
}
