package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/redisstore"
	"github.com/pacer-go/pacer/redisstore/internal/redistest"
	"github.com/pacer-go/pacer/store"
)

// TestClusterFailoverToAReplica kills a master that has a replica: its keys
// fall back until the replica takes over, then use Redis again through the
// new master, without the old one coming back.
func TestClusterFailoverToAReplica(t *testing.T) {
	c := redistest.StartClusterWithReplicas(t, 3)
	cc := c.Client(t)
	calls := newScriptCalls()
	cc.AddHook(calls)
	logs := &logBuffer{}
	prefix := uniquePrefix()
	s := redisstore.New(cc, redisstore.WithPrefix(prefix),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		redisstore.WithTimeout(500*time.Millisecond), redisstore.WithProbeInterval(50*time.Millisecond),
		redisstore.WithLeaseWindow(0))
	defer func() { require.NoError(t, s.Close()) }()
	r := store.Request{Tokens: 1, Limit: 1000, Burst: 100}
	reserve := func() {
		t.Helper()
		g, err := s.Reserve(context.Background(), "k", r)
		require.NoError(t, err)
		require.True(t, g.OK)
	}
	reserve()
	victim := c.Node(masterOf(t, cc, prefix+"k"))
	require.NotNil(t, victim)

	start := time.Now()
	victim.Kill()
	reserve()
	require.True(t, s.Stats().Down, "the master's death was noticed")
	before := calls.count([]string{prefix + "k"})
	require.Eventually(t, func() bool {
		reserve() // fail-open: granted all along
		return calls.count([]string{prefix + "k"}) > before
	}, 10*redistest.ClusterNodeTimeout, 20*time.Millisecond, "the key uses Redis again through the replica\n%s\n%s", logs.buf.String(), c.Describe())
	t.Logf("key back on Redis %v after the kill", time.Since(start).Round(time.Millisecond))
	assert.NotEqual(t, victim.Addr, masterOf(t, cc, prefix+"k"))
	// The old master's shard is retired by its next probe.
	assert.Eventually(t, func() bool { return !s.Stats().Down }, time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, logs.count("level=WARN"), logs.buf.String())
	assert.Equal(t, 1, logs.count("have another master now"), logs.buf.String())
}

// TestClusterUnreachableAtStart: a store whose cluster is down before its
// first call cannot load the slot map. Calls still end by their context, are
// refused (fail-closed) once the attempt failed, and the store starts using
// the cluster by itself once it is up.
func TestClusterUnreachableAtStart(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	for _, n := range c.Nodes {
		n.Kill()
	}
	cc := c.Client(t)
	s := redisstore.New(cc, redisstore.WithPrefix(uniquePrefix()), redisstore.WithLogger(quiet),
		redisstore.WithFailureMode(redisstore.FailClosed),
		redisstore.WithTimeout(300*time.Millisecond), redisstore.WithProbeInterval(50*time.Millisecond))
	defer func() { require.NoError(t, s.Close()) }()
	r := store.Request{Tokens: 1, Limit: 1000, Burst: 100}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	start := time.Now()
	_, err := s.Reserve(ctx, "k", r)
	took := time.Since(start)
	cancel()
	require.Error(t, err)
	assert.Less(t, took, 50*time.Millisecond+slack, "the first call ends by its context")

	var rle *pacer.RateLimitError
	require.Eventually(t, func() bool {
		_, err := s.Reserve(context.Background(), "k", r)
		return errors.As(err, &rle)
	}, 5*time.Second, 10*time.Millisecond)
	var se *redisstore.ShardError
	require.ErrorAs(t, rle.Err, &se)
	assert.Empty(t, se.Shard, "no master known yet")
	assert.True(t, errors.Is(se, redisstore.ErrRefused) || errors.Is(se, redisstore.ErrTimeout), "%v", se)
	assert.Equal(t, []string{""}, s.Stats().DownShards)

	for _, n := range c.Nodes {
		n.Restart()
	}
	c.WaitOK()
	require.Eventually(t, func() bool {
		_, err := s.Reserve(context.Background(), "k", r)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the store routes its keys once the cluster is up")
	assert.False(t, s.Stats().Down, fmt.Sprint(s.Stats()))
}
