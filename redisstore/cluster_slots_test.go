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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/redisstore"
	"github.com/pacer-go/pacer/redisstore/internal/redistest"
	"github.com/pacer-go/pacer/store"
)

// TestClusterKeysSpreadOverMastersAndShareTheirLimits: 600 keys land on all
// three masters, and three stores (processes) that reserve on every key at
// once share each key's bucket exactly: at a negligible rate with a burst of
// 3, six attempts per key get exactly 3 tokens.
func TestClusterKeysSpreadOverMastersAndShareTheirLimits(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	cc := c.Client(t)
	prefix := uniquePrefix()
	const nkeys = 600
	perMaster := make(map[string]int)
	for i := range nkeys {
		perMaster[masterOf(t, cc, fmt.Sprintf("%sk%d", prefix, i))]++
	}
	t.Logf("keys per master: %v", perMaster)
	require.Len(t, perMaster, 3)
	for addr, n := range perMaster {
		assert.Greater(t, n, nkeys/4, "master %s holds about a third of the keys", addr)
	}

	var stores []*redisstore.Store
	for range 3 {
		s := redisstore.New(cc, redisstore.WithPrefix(prefix), redisstore.WithLogger(quiet),
			redisstore.WithFailureMode(redisstore.FailClosed), redisstore.WithTimeout(2*time.Second))
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		stores = append(stores, s)
	}
	r := store.Request{Tokens: 1, Limit: 0.001, Burst: 3, MaxWait: time.Microsecond}
	var (
		granted [nkeys]atomic.Int32
		wg      sync.WaitGroup
	)
	for _, s := range stores {
		for g := range 2 { // two attempts per key and store, from two goroutines
			wg.Go(func() {
				for i := range nkeys {
					k := (i + g*nkeys/2) % nkeys
					gr, err := s.Reserve(context.Background(), fmt.Sprintf("k%d", k), r)
					if !assert.NoError(t, err) {
						return
					}
					if gr.OK {
						granted[k].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	for k := range nkeys {
		require.EqualValues(t, 3, granted[k].Load(), "key k%d", k)
	}
	for _, s := range stores {
		st := s.Stats()
		assert.Zero(t, st.Failures+st.Fallbacks, "%+v", st)
	}
}

// TestClusterSlotMovesMidRun moves the slot of 8 busy keys to another master
// while two stores (one leasing, one not, both fail-closed) reserve on them:
// the client follows the ASK and MOVED redirections, so no call fails, no
// master is taken for down, and each bucket moves with its key (no key hands
// out more than its burst plus its rate).
func TestClusterSlotMovesMidRun(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	cc := c.Client(t)
	prefix := uniquePrefix()
	var hot []string // one hash tag: one slot
	for i := range 8 {
		hot = append(hot, fmt.Sprintf("{hot}%d", i))
	}
	ctx := context.Background()
	slot, err := cc.ClusterKeySlot(ctx, prefix+hot[0]).Result()
	require.NoError(t, err)
	from := c.Node(masterOf(t, cc, prefix+hot[0]))
	require.NotNil(t, from)
	to := c.Nodes[0]
	if to == from {
		to = c.Nodes[1]
	}

	var stores []*redisstore.Store
	for _, window := range []time.Duration{redisstore.DefaultLeaseWindow, 0} {
		s := redisstore.New(cc, redisstore.WithPrefix(prefix), redisstore.WithLogger(quiet),
			redisstore.WithFailureMode(redisstore.FailClosed), redisstore.WithTimeout(2*time.Second),
			redisstore.WithLeaseWindow(window))
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		stores = append(stores, s)
	}
	const limit, burst = 100, 10
	r := store.Request{Tokens: 1, Limit: limit, Burst: burst, MaxWait: time.Microsecond}
	keys := append([]string{"cold0", "cold1", "cold2", "cold3"}, hot...)
	var (
		stop    atomic.Bool
		granted sync.Map // key → *atomic.Int64
		errs    sync.Map
		wg      sync.WaitGroup
	)
	for _, k := range keys {
		granted.Store(k, new(atomic.Int64))
	}
	start := time.Now()
	for _, s := range stores {
		for g := range 3 {
			wg.Go(func() {
				for i := g; !stop.Load(); i++ {
					k := keys[i%len(keys)]
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					gr, err := s.Reserve(ctx, k, r)
					cancel()
					switch {
					case err != nil:
						errs.Store(err.Error(), true)
					case gr.OK:
						n, _ := granted.Load(k)
						n.(*atomic.Int64).Add(1)
					}
					time.Sleep(200 * time.Microsecond)
				}
			})
		}
	}
	time.Sleep(200 * time.Millisecond)
	moved := c.MoveSlot(int(slot), from, to, 50*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)

	errs.Range(func(k, _ any) bool { t.Errorf("call failed during the move: %v", k); return true })
	assert.Equal(t, len(hot), moved, "the hot keys were in Redis, and moved")
	require.Eventually(t, func() bool { return masterOf(t, cc, prefix+hot[0]) == to.Addr }, 5*time.Second, 10*time.Millisecond)
	most := int64(burst + limit*elapsed.Seconds() + 1)
	for _, k := range hot {
		n, _ := granted.Load(k)
		got := n.(*atomic.Int64).Load()
		assert.Positive(t, got)
		assert.LessOrEqual(t, got, most, "key %s within its bucket across the move", k)
	}
	for _, s := range stores {
		st := s.Stats()
		t.Logf("stats %+v", st)
		assert.Zero(t, st.Failures+st.Fallbacks+st.Outages)
	}
}

// TestClusterDownIsNotMistakenForHealth runs a cluster with Redis's default
// cluster-require-full-coverage yes: once the killed master is marked failed,
// every master refuses keyed commands with CLUSTERDOWN (though each still
// answers PING). The store reports CLUSTERDOWN, its probes keep every master
// down until the cluster is whole again (no flapping), and it recovers them
// all after the restart, with one warning and one recovery per master.
func TestClusterDownIsNotMistakenForHealth(t *testing.T) {
	c := redistest.StartCluster(t, 3, "--cluster-require-full-coverage", "yes")
	cc := c.Client(t)
	logs := &logBuffer{}
	prefix := uniquePrefix()
	s := redisstore.New(cc, redisstore.WithPrefix(prefix),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		redisstore.WithFailureMode(redisstore.FailClosed), redisstore.WithTimeout(500*time.Millisecond),
		redisstore.WithProbeInterval(50*time.Millisecond), redisstore.WithLeaseWindow(0))
	defer func() { require.NoError(t, s.Close()) }()
	victim := c.Nodes[0]
	keyOn := make(map[string]string) // master → a key on it
	for i := 0; len(keyOn) < 3; i++ {
		k := fmt.Sprintf("k%d", i)
		if m := masterOf(t, cc, prefix+k); keyOn[m] == "" {
			keyOn[m] = k
		}
	}
	r := store.Request{Tokens: 1, Limit: 1000, Burst: 100}
	for _, k := range keyOn {
		_, err := s.Reserve(context.Background(), k, r)
		require.NoError(t, err)
	}

	start := time.Now()
	victim.Kill()
	require.Eventually(t, func() bool {
		down := 0
		for m, k := range keyOn {
			_, err := s.Reserve(context.Background(), k, r)
			if m == victim.Addr {
				assert.ErrorIs(t, err, redisstore.ErrRefused, "the killed master")
			} else if errors.Is(err, redisstore.ErrClusterDown) {
				down++
			} else {
				require.NoError(t, err)
			}
		}
		return down == 2
	}, 5*redistest.ClusterNodeTimeout, 20*time.Millisecond, "the live masters' keys are refused with CLUSTERDOWN once the cluster is down")
	t.Logf("cluster down %v after the kill; log:\n%s", time.Since(start).Round(time.Millisecond), logs.buf.String())

	// 20 probe intervals: the live masters answer PING, but not keyed
	// commands; their probes must not bring them back.
	time.Sleep(time.Second)
	for _, k := range keyOn {
		_, err := s.Reserve(context.Background(), k, r)
		var rle *pacer.RateLimitError
		assert.ErrorAs(t, err, &rle)
	}
	assert.Zero(t, strings.Count(logs.buf.String(), "reachable again"), "no flapping:\n%s", logs.buf.String())

	start = time.Now()
	victim.Restart()
	c.WaitOK()
	t.Logf("cluster ok %v after the restart", time.Since(start).Round(time.Millisecond))
	require.Eventually(t, func() bool { return !s.Stats().Down }, 10*time.Second, 10*time.Millisecond, "recovery")
	t.Logf("store recovered %v after the restart", time.Since(start).Round(time.Millisecond))
	for _, k := range keyOn {
		_, err := s.Reserve(context.Background(), k, r)
		assert.NoError(t, err)
	}
	assert.Equal(t, 3, logs.count("level=WARN"), "one warning per master:\n%s", logs.buf.String())
	assert.Equal(t, 3, logs.count("reachable again"))
	assert.EqualValues(t, 3, s.Stats().Outages)
}
