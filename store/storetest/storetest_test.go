package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pacer-go/pacer/store"
	"github.com/pacer-go/pacer/store/storetest"
)

func TestMemoryPassesTheSuite(t *testing.T) {
	storetest.Run(t, newPeers)
}

// brokenStores each break one promise of the Store interface, on top of a
// Memory store; cases are the suite's cases that must catch the breach.
var brokenStores = map[string]struct {
	cases []string
	peers func(t *testing.T) storetest.Peers
	opts  []storetest.Option
}{
	"IgnoresCancel": {
		cases: []string{"CancelReturnsTokensToTheBucket", "CancelledTokensGoToOtherPeers", "ConcurrentCallersLoseNoCancel"},
		peers: wrapped(func(s *broken) { s.ignoreCancel = true }),
	},
	"PublishesOnlyOnFlush": {
		cases: []string{"PublishIsVisibleToThePublisherAtOnce"},
		peers: wrapped(func(s *broken) { s.lazyPublish = true }),
	},
	"IgnoresEndedContexts": {
		cases: []string{"EndedContextFailsAtOnceWithItsError"},
		peers: wrapped(func(s *broken) { s.ignoreCtx = true }),
	},
	"ForgetsIdleKeysTooLate": { // a store.Memory forgets after 10 minutes, not 1.5 s
		cases: []string{"IdleKeysAreForgottenAndUsedOnesKept"},
		peers: newPeers,
		opts:  []storetest.Option{storetest.IdleTTL(1500 * time.Millisecond)},
	},
}

const brokenEnv = "STORETEST_BROKEN_STORE"

// TestSuiteCatchesBrokenStores runs the suite on each broken store in a
// child process (a failing subtest cannot be contained in this one) and
// checks that the cases for the promise it breaks fail.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a test process per broken store")
	}
	for name, b := range brokenStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pattern := "^TestBrokenStore$/^(" + strings.Join(b.cases, "|") + ")$"
			cmd := exec.Command(os.Args[0], "-test.run", pattern, "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store that breaks a promise:\n%s", out)
			}
			for _, c := range b.cases {
				if !strings.Contains(string(out), "--- FAIL: TestBrokenStore/"+c+" ") {
					t.Errorf("case %s did not fail:\n%s", c, out)
				}
			}
		})
	}
}

// TestBrokenStore is TestSuiteCatchesBrokenStores's child: it runs the suite
// on the store the environment names, and is expected to fail.
func TestBrokenStore(t *testing.T) {
	b, ok := brokenStores[os.Getenv(brokenEnv)]
	if !ok {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	storetest.Run(t, b.peers, b.opts...)
}

// broken is a store.Memory with one promise broken.
type broken struct {
	*store.Memory
	ignoreCancel, lazyPublish, ignoreCtx bool

	mu      sync.Mutex
	pending map[string][]store.State // lazyPublish: applied by Flush
}

func wrapped(breach func(*broken)) func(t *testing.T) storetest.Peers {
	return func(t *testing.T) storetest.Peers {
		s := &broken{Memory: store.NewMemory(), pending: map[string][]store.State{}}
		breach(s)
		return func() store.Store { return s }
	}
}

func (s *broken) Reserve(ctx context.Context, key string, r store.Request) (store.Grant, error) {
	if s.ignoreCtx {
		ctx = context.WithoutCancel(ctx)
	}
	return s.Memory.Reserve(ctx, key, r)
}

func (s *broken) Cancel(key string, r store.Request) {
	if !s.ignoreCancel {
		s.Memory.Cancel(key, r)
	}
}

func (s *broken) Publish(ctx context.Context, key string, st store.State) error {
	if s.ignoreCtx {
		ctx = context.WithoutCancel(ctx)
	}
	if !s.lazyPublish {
		return s.Memory.Publish(ctx, key, st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[key] = append(s.pending[key], st)
	return nil
}

func (s *broken) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, sts := range s.pending {
		for _, st := range sts {
			if err := s.Memory.Publish(ctx, key, st); err != nil {
				return err
			}
		}
	}
	clear(s.pending)
	return nil
}
