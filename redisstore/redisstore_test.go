package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/pacer-go/pacer/redisstore"
	"github.com/pacer-go/pacer/redisstore/internal/redistest"
	"github.com/pacer-go/pacer/store"
	"github.com/pacer-go/pacer/store/storetest"
)

func TestMain(m *testing.M) {
	redis.SetLogger(silent{}) // tests kill Redis on purpose; spare the log the failed dials
	goleak.VerifyTestMain(m)
}

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

var prefixes atomic.Int64

// uniquePrefix isolates tests sharing one Redis.
func uniquePrefix() string { return fmt.Sprintf("test%d:", prefixes.Add(1)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newStore returns a store on srv, closed (and checked to close cleanly) at
// the end of the test. Its Redis timeout is generous: on a loaded machine a
// call can take longer than the default 100 ms, and a fallback would muddle
// tests that are not about failures.
func newStore(t *testing.T, srv *redistest.Server, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	defaults := []redisstore.Option{redisstore.WithLogger(quiet), redisstore.WithTimeout(2 * time.Second)}
	s := redisstore.New(srv.Client(t), append(defaults, opts...)...)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// TestConformance runs the public Store suite on one Redis, with and without
// leases, and with a short idle TTL so that the suite checks keys expire.
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = 1500 * time.Millisecond
	for _, mode := range []struct {
		name string
		opts []redisstore.Option
	}{
		{"Leased", nil},
		{"Unleased", []redisstore.Option{redisstore.WithLeaseWindow(0)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Peers {
				opts := append([]redisstore.Option{redisstore.WithPrefix(uniquePrefix()), redisstore.WithIdleTTL(ttl)}, mode.opts...)
				return func() store.Store { return newStore(t, srv, opts...) }
			}, storetest.IdleTTL(ttl))
		})
	}
}
