package redisstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
)

// The multi-process test re-executes this test binary: the children run
// TestMultiProcessChild, configured through these environment variables.
const (
	envChild   = "PACER_MP_CHILD"   // "shared" (through Redis) or "independent"
	envURL     = "PACER_MP_URL"     // the simulated API
	envRedis   = "PACER_MP_REDIS"   // host:port
	envPrefix  = "PACER_MP_PREFIX"  // Redis key prefix of this run
	envStart   = "PACER_MP_START"   // unix nanoseconds at which to start sending
	envRun     = "PACER_MP_RUN"     // how long to send, a time.Duration
	envWorkers = "PACER_MP_WORKERS" // concurrent requests per process
	resultTag  = "PACER_MP_RESULT "
)

// childResult is what a child process reports on stdout.
type childResult struct {
	OK             int  `json:"ok"`
	Throttled      int  `json:"throttled"`       // 429s after the process's first response
	FirstThrottled bool `json:"first_throttled"` // the first response was a 429
	Errors         []string
	Store          redisstore.Stats
}

const (
	mpProcesses = 4
	mpWorkers   = 8
	mpLimit     = 60 // requests per window, shared by all processes
	mpWindow    = time.Second
	mpRun       = 6 * time.Second
)

// TestFourProcessesShareOneQuotaThroughRedis starts four OS processes (this
// test binary, re-executed) that call one simulated API with one quota, each
// with its own pacer Transport. Sharing a redisstore they pace as one
// client: no 429 after each process's first response, and at least 85% of
// the quota used. Without the store each sees the others only as drops in
// Remaining it did not cause and estimates their spending; that run is
// logged as the reference (in real time its figure varies with the machine's
// load; the deterministic bound on it is TestTransportsSharingAStoreShareOneQuota).
func TestFourProcessesShareOneQuotaThroughRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four processes for several seconds")
	}
	srv := redistest.Start(t)
	for _, mode := range []string{"shared", "independent"} {
		t.Run(mode, func(t *testing.T) {
			api := apisim.New(apisim.Config{Style: apisim.StyleOpenAI, Limit: mpLimit, Window: mpWindow, Latency: 20 * time.Millisecond})
			hs := httptest.NewServer(api)
			defer hs.Close()

			start := time.Now().Add(2 * time.Second) // leaves the children time to start
			results := runChildren(t, mode, hs.URL, srv.Addr, start)

			ok, throttled, first := 0, 0, 0
			for _, e := range api.Events() {
				if e.At.Before(start) || !e.At.Before(start.Add(mpRun)) {
					continue
				}
				if e.Status == http.StatusOK {
					ok++
				} else {
					throttled++
				}
			}
			later := 0
			for _, r := range results {
				later += r.Throttled
				if r.FirstThrottled {
					first++
				}
				assert.Empty(t, r.Errors)
			}
			capacity := api.Capacity(start, start.Add(mpRun))
			goodput := float64(ok) / capacity
			t.Logf("%s: %d processes: %d OK, %d throttled (%d as a first response), goodput %.3f of capacity %.0f",
				mode, mpProcesses, ok, throttled, first, goodput, capacity)
			for i, r := range results {
				t.Logf("process %d: %+v", i, r)
			}
			if mode == "shared" {
				assert.Zero(t, later, "no 429 after each process's first response")
				assert.GreaterOrEqual(t, goodput, 0.85)
			} else {
				t.Logf("independent reference: %d 429s after first responses, goodput %.3f", later, goodput)
			}
		})
	}
}

// runChildren runs the processes and collects their reports.
func runChildren(t *testing.T, mode, url, redisAddr string, start time.Time) []childResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Until(start)+mpRun+60*time.Second)
	defer cancel()
	prefix := uniquePrefix()
	results := make([]childResult, mpProcesses)
	errs := make([]error, mpProcesses)
	var wg sync.WaitGroup
	for i := range mpProcesses {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMultiProcessChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(),
			envChild+"="+mode, envURL+"="+url, envRedis+"="+redisAddr, envPrefix+"="+prefix,
			envStart+"="+strconv.FormatInt(start.UnixNano(), 10), envRun+"="+mpRun.String(),
			envWorkers+"="+strconv.Itoa(mpWorkers))
		wg.Go(func() {
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("process %d: %v\n%s", i, err, out)
				return
			}
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			for sc.Scan() {
				if line, found := strings.CutPrefix(sc.Text(), resultTag); found {
					errs[i] = json.Unmarshal([]byte(line), &results[i])
					return
				}
			}
			errs[i] = fmt.Errorf("process %d reported nothing:\n%s", i, out)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return results
}

// TestMultiProcessChild is one process of TestFourProcessesShareOneQuota;
// it does nothing unless started by it.
func TestMultiProcessChild(t *testing.T) {
	mode := os.Getenv(envChild)
	if mode == "" {
		t.Skip("a child process of TestFourProcessesShareOneQuotaThroughRedis")
	}
	startNanos, err := strconv.ParseInt(os.Getenv(envStart), 10, 64)
	require.NoError(t, err)
	run, err := time.ParseDuration(os.Getenv(envRun))
	require.NoError(t, err)
	workers, err := strconv.Atoi(os.Getenv(envWorkers))
	require.NoError(t, err)

	opts := []pacer.Option{pacer.WithRetries(0)}
	var store *redisstore.Store
	if mode == "shared" {
		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis), ContextTimeoutEnabled: true})
		defer rdb.Close()
		store = redisstore.New(rdb, redisstore.WithPrefix(os.Getenv(envPrefix)), redisstore.WithLogger(quiet))
		defer func() { require.NoError(t, store.Close()) }()
		opts = append(opts, pacer.WithStore(store))
	}
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: pacer.NewTransport(tr, opts...)}

	start := time.Unix(0, startNanos)
	time.Sleep(time.Until(start))
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(run))
	defer cancel()

	var (
		res       childResult
		mu        sync.Mutex
		responses atomic.Int64
		wg        sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, os.Getenv(envURL)+"/v1/items", nil)
				resp, err := client.Do(req)
				var rle *pacer.RateLimitError
				switch {
				case errors.As(err, &rle):
					if errors.Is(err, context.DeadlineExceeded) {
						<-ctx.Done() // the next request would start after the run
						return
					}
					timer := time.NewTimer(time.Until(rle.RetryAt))
					select {
					case <-timer.C:
					case <-ctx.Done():
						timer.Stop()
					}
					continue
				case err != nil:
					if ctx.Err() == nil {
						mu.Lock()
						res.Errors = append(res.Errors, err.Error())
						mu.Unlock()
					}
					continue
				}
				resp.Body.Close()
				first := responses.Add(1) == 1
				mu.Lock()
				switch {
				case resp.StatusCode == http.StatusOK:
					res.OK++
				case first:
					res.FirstThrottled = true
				default:
					res.Throttled++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if store != nil {
		res.Store = store.Stats()
	}
	out, err := json.Marshal(res)
	require.NoError(t, err)
	fmt.Println(resultTag + string(out))
}
