package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
	"github.com/pacer-go/pacer/redisstore"
	"github.com/pacer-go/pacer/redisstore/internal/redistest"
	"github.com/pacer-go/pacer/retry"
)

// The job of TestAFleetJobLosesLittleWhenAMasterDies: four members (each
// its own Transport, store and cluster client) of four workers send 450
// requests to a GitHub-style API with 300 a window: the first window's 300
// at once, the rest when the second opens. The window is long against a
// failover (redistest.ClusterNodeTimeout, then an election), so that the
// outage falls within the first window, as most would within a real
// quota's; the master dies a third of the way into it.
const (
	killLimit   = 300
	killWindow  = 10 * time.Second
	killJob     = 450
	killMembers = 4
	killWorkers = 4
	killLatency = 50 * time.Millisecond
	killAfter   = 100              // responses before the kill
	killPerCall = 20 * time.Second // each call's context: a wait for the next window fits in it
	// killLeaseSpan is how much of its spending a member leases at once
	// (pacer's leaseSpan).
	killLeaseSpan = 100 * time.Millisecond
)

// jobOutcome counts what the calls of a job got.
type jobOutcome struct {
	took time.Duration
	// ok and throttled are responses (200, 429); refused are
	// *pacer.RateLimitErrors (nothing was sent), refusedRequests the
	// requests refused at least once; ended are calls that hit their
	// context; failed are other errors.
	ok, throttled, refused, refusedRequests, ended, failed atomic.Int64
	longest                                                atomic.Int64 // the longest call, in ns
	killedAt                                               time.Duration
	downFor                                                time.Duration   // from the kill until every store used Redis again
	duringOutage                                           int             // requests answered OK meanwhile
	throttledAt                                            []time.Duration // when the server answered 429, from the kill
	fallbacks                                              int64           // reservations the stores' fallbacks answered
}

func (o *jobOutcome) String() string {
	return fmt.Sprintf("took %v; %d OK, %d 429s %v, %d refusals of %d requests, %d calls ended by their context, %d other errors; longest call %v",
		o.took.Round(time.Millisecond), o.ok.Load(), o.throttled.Load(), o.throttledAt, o.refused.Load(), o.refusedRequests.Load(),
		o.ended.Load(), o.failed.Load(), time.Duration(o.longest.Load()).Round(time.Millisecond))
}

// TestAFleetJobLosesLittleWhenAMasterDies runs a fan-out job through pacer
// Transports that share a fleet budget on a Redis Cluster, and kills the
// master that holds the budget (and the endpoint's buckets) mid-job; a
// replica takes over. What the job may lose:
//
//   - No request is lost: every call returns, with a response or an error,
//     and none reaches its context's end. Under FailOpen no call fails;
//     under FailClosed the store refuses requests while the master is down
//     (each a *pacer.RateLimitError saying when to try again: nothing was
//     sent), and the job sends them again.
//   - Few 429s: cut off from the store, a member spends, until the window's
//     reset, its lease and its share of the budget the store last told it.
//     The others may have leased some of that budget since, at most a lease
//     each (pacer leases a tenth of a second of a member's spending): the
//     shares overshoot by at most the fleet's spending in a tenth of a
//     second (32 requests here), and by far less in practice (0 in most
//     runs, 2 at worst in 17). Back on the replica, each member's first
//     call reports what it holds and the lowest figure its responses
//     showed meanwhile. This holds while the outage stays within a window,
//     as here; one that spans a reset leaves each member to its own model
//     for the new window, and the fleet may overshoot by the requests it
//     has in flight.
//   - Time: the job waits for its second window either way; it may end up
//     to a failover later (the members whose shares ran out wait for the
//     store), never a window later.
func TestAFleetJobLosesLittleWhenAMasterDies(t *testing.T) {
	if testing.Short() {
		t.Skip("a Redis Cluster with replicas, and jobs of two windows")
	}
	c := redistest.StartClusterWithReplicas(t, 3)
	stalls := meterStalls(t)
	base := runKillJob(t, c, redisstore.FailOpen, false)
	t.Logf("no kill: %v", base)
	require.Zero(t, base.throttled.Load()+base.refused.Load()+base.ended.Load()+base.failed.Load(), "without a kill: %v", base)

	for _, mode := range []redisstore.FailureMode{redisstore.FailOpen, redisstore.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			c.WaitOK() // the master killed before is back, as a replica
			o := runKillJob(t, c, mode, true)
			added := o.took - base.took
			t.Logf("%v, master killed %v into the job, every store on Redis again %v later (%d requests answered OK meanwhile, %d reservations by the stores' fallbacks): %v; time added %v (worst stall of the machine %v)",
				mode, o.killedAt.Round(time.Millisecond), o.downFor.Round(time.Millisecond), o.duringOutage, o.fallbacks,
				o, added.Round(time.Millisecond), stalls.worst())

			assert.Equal(t, int64(killJob), o.ok.Load(), "every request of the job answered OK in the end")
			assert.Zero(t, o.failed.Load(), "no call failed but by a refusal")
			assert.Zero(t, o.ended.Load(), "no call reached its context's end")
			assert.Less(t, time.Duration(o.longest.Load()), killPerCall, "no call outlived its context")
			assert.LessOrEqual(t, o.throttled.Load(), int64(killMembers*killWorkers*killLeaseSpan/killLatency),
				"429s: at most the fleet's spending in a lease span")
			if mode == redisstore.FailOpen {
				assert.Zero(t, o.refused.Load(), "fail-open: nothing refused")
			}
			// The job waits for its second window either way: the kill adds
			// at most the failover (and a loaded machine's stalls), never
			// a window.
			assert.Less(t, added, killWindow/2+stalls.worst(), "time added")
		})
	}
}

// runKillJob runs the job once on fresh keys, killing (and then
// restarting, as a replica) the master of the endpoint's keys after
// killAfter responses when kill is set.
func runKillJob(t *testing.T, c *redistest.Cluster, mode redisstore.FailureMode, kill bool) *jobOutcome {
	t.Helper()
	api := apisim.New(apisim.Config{Style: apisim.StyleGitHub, Limit: killLimit, Window: killWindow, Latency: killLatency})
	hs := httptest.NewServer(api)
	defer hs.Close()
	// The keys the members use: the endpoint's buckets (before and after
	// the server names its bucket "core") and the fleet's budget of its
	// quota. On one master, the kill takes them all down.
	endpoint := "http://" + hs.Listener.Addr().String()
	keys := []string{endpoint, endpoint + "#core", endpoint + "#core\x00budget\x00"}
	admin := c.Client(t)
	prefix, master := samePrefixMaster(t, admin, keys)
	victim := c.Node(master)
	require.NotNil(t, victim)

	logs := &logBuffer{}
	stores := make([]*redisstore.Store, killMembers)
	clients := make([]*http.Client, killMembers)
	for i := range killMembers {
		stores[i] = redisstore.New(c.Client(t), redisstore.WithPrefix(prefix), redisstore.WithFailureMode(mode),
			redisstore.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
			// The store's timeout as on a loaded machine: its calls must
			// not fail of their own.
			redisstore.WithTimeout(500*time.Millisecond), redisstore.WithProbeInterval(50*time.Millisecond))
		tr := &http.Transport{MaxIdleConnsPerHost: killWorkers}
		defer tr.CloseIdleConnections()
		clients[i] = &http.Client{Transport: pacer.NewTransport(tr, pacer.WithStore(stores[i]), pacer.WithRetry(retry.Policy{Max: retry.None}))}
	}
	defer func() {
		for _, s := range stores {
			assert.NoError(t, s.Close())
		}
	}()

	o := &jobOutcome{}
	start := time.Now()
	var (
		killed   = make(chan struct{})
		killedAt time.Time
		answered atomic.Int64
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	onAnswer := func() {
		if kill && answered.Add(1) == killAfter {
			// The budget is where the members' leases say it is: the key
			// layout this test kills is the one the store uses.
			n, err := admin.Exists(context.Background(), prefix+keys[2]).Result()
			assert.NoError(t, err)
			assert.Equal(t, int64(1), n, "the budget's key")
			victim.Kill()
			killedAt = time.Now()
			close(killed)
		}
	}
	for i := range killMembers * killWorkers {
		client := clients[i%killMembers]
		wg.Go(func() {
			for next.Add(1) <= killJob {
				refused := false
				for done := false; !done; {
					done = killJobCall(client, hs.URL, o, &refused, onAnswer)
				}
			}
		})
	}
	// From the kill, until every store that found the master down uses
	// Redis again, through the replica that took over (their probes find
	// the keys' new master).
	back := make(chan time.Time, 1)
	if kill {
		wg.Go(func() {
			<-killed
			wasDown := false
			for {
				down := false
				for _, s := range stores {
					down = down || s.Stats().Down
				}
				wasDown = wasDown || down
				if wasDown && !down {
					back <- time.Now()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	o.took = time.Since(start)
	if kill {
		o.killedAt = killedAt.Sub(start)
		backAt := <-back
		o.downFor = backAt.Sub(killedAt)
		for _, e := range api.Events() {
			if e.Status == http.StatusOK && e.At.After(killedAt) && e.At.Before(backAt) {
				o.duringOutage++
			}
			if e.Status != http.StatusOK {
				o.throttledAt = append(o.throttledAt, e.At.Sub(killedAt).Round(time.Millisecond))
			}
		}
		for _, s := range stores {
			o.fallbacks += s.Stats().Fallbacks
		}
		assert.NotEqual(t, master, masterOf(t, c.Client(t), prefix+keys[2]), "a replica took over")
		warnings := logs.count("level=WARN")
		assert.Positive(t, warnings, "the stores found the master down")
		assert.LessOrEqual(t, warnings, killMembers, "each store warned once at most, no flapping:\n%s", logs.buf.String())
		victim.Restart() // it rejoins as the new master's replica
	}
	return o
}

// killJobCall sends one request of the job and counts its outcome; false
// when it is to be sent again (a 429, a refusal, an error).
func killJobCall(client *http.Client, url string, o *jobOutcome, refused *bool, onAnswer func()) bool {
	ctx, cancel := context.WithTimeout(context.Background(), killPerCall)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/items", nil)
	start := time.Now()
	resp, err := client.Do(req)
	took := time.Since(start)
	for old := o.longest.Load(); int64(took) > old && !o.longest.CompareAndSwap(old, int64(took)); old = o.longest.Load() {
	}
	var rle *pacer.RateLimitError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		o.ended.Add(1)
		return false
	case errors.As(err, &rle):
		o.refused.Add(1)
		if !*refused {
			*refused = true
			o.refusedRequests.Add(1)
		}
		// Nothing was sent: again when the store says it may be.
		time.Sleep(min(time.Until(rle.RetryAt), killPerCall))
		return false
	case err != nil:
		o.failed.Add(1)
		return false
	}
	resp.Body.Close()
	onAnswer()
	if resp.StatusCode != http.StatusOK {
		o.throttled.Add(1)
		return false
	}
	o.ok.Add(1)
	return true
}

// samePrefixMaster returns a fresh key prefix under which every key lives
// on one master, and that master's address.
func samePrefixMaster(t *testing.T, cc *redis.ClusterClient, keys []string) (string, string) {
	t.Helper()
	for range 1000 {
		prefix := uniquePrefix()
		master := masterOf(t, cc, prefix+keys[0])
		same := true
		for _, k := range keys[1:] {
			same = same && masterOf(t, cc, prefix+k) == master
		}
		if same {
			return prefix, master
		}
	}
	t.Fatal("no prefix puts the keys on one master")
	return "", ""
}
