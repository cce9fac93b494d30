package redisstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	envRun     = "PACER_MP_RUN"     // how long to send, a time.Duration
	envWorkers = "PACER_MP_WORKERS" // concurrent requests per process
	resultTag  = "PACER_MP_RESULT "
	// A child prints readyTag once it is set up, then reads from stdin the
	// unix nanoseconds at which to start sending: a start chosen once every
	// process is ready, however long a loaded machine takes to start them.
	readyTag = "PACER_MP_READY"
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

			results, start := runChildren(t, mode, hs.URL, srv.Addr)

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

// runChildren starts the processes, waits until each is ready, starts them
// together and collects their reports. It returns the reports and the start.
func runChildren(t *testing.T, mode, url, redisAddr string) ([]childResult, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mpRun+2*time.Minute)
	defer cancel()
	prefix := uniquePrefix()
	results := make([]childResult, mpProcesses)
	errs := make([]error, mpProcesses)
	stdins := make([]io.WriteCloser, mpProcesses)
	ready := make(chan int, mpProcesses)
	var wg sync.WaitGroup
	for i := range mpProcesses {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMultiProcessChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(),
			envChild+"="+mode, envURL+"="+url, envRedis+"="+redisAddr, envPrefix+"="+prefix,
			envRun+"="+mpRun.String(), envWorkers+"="+strconv.Itoa(mpWorkers))
		var err error
		stdins[i], err = cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		wg.Go(func() {
			var out strings.Builder
			readied := false
			defer func() {
				if !readied { // it died before: do not keep the others waiting
					ready <- i
				}
			}()
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				out.WriteString(line + "\n")
				if line == readyTag && !readied {
					readied = true
					ready <- i
				} else if res, found := strings.CutPrefix(line, resultTag); found && errs[i] == nil {
					errs[i] = json.Unmarshal([]byte(res), &results[i])
					if errs[i] == nil {
						errs[i] = errReported
					}
				}
			}
			err := cmd.Wait()
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("process %d: %v\n%s%s", i, err, &out, &stderr)
			case errs[i] == errReported:
				errs[i] = nil
			case errs[i] == nil:
				errs[i] = fmt.Errorf("process %d reported nothing:\n%s%s", i, &out, &stderr)
			}
		})
	}
	// Every process set up (its Transport, its Redis client): start them in
	// a moment, together.
	for range mpProcesses {
		select {
		case <-ready:
		case <-ctx.Done():
		}
	}
	start := time.Now().Add(100 * time.Millisecond)
	for _, in := range stdins {
		fmt.Fprintln(in, start.UnixNano())
		in.Close()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return results, start
}

// errReported marks a child whose report was read, until it exits.
var errReported = errors.New("reported")

// TestMultiProcessChild is one process of TestFourProcessesShareOneQuota;
// it does nothing unless started by it.
func TestMultiProcessChild(t *testing.T) {
	mode := os.Getenv(envChild)
	if mode == "" {
		t.Skip("a child process of TestFourProcessesShareOneQuotaThroughRedis")
	}
	run, err := time.ParseDuration(os.Getenv(envRun))
	require.NoError(t, err)
	workers, err := strconv.Atoi(os.Getenv(envWorkers))
	require.NoError(t, err)

	opts := []pacer.Option{pacer.WithRetries(0)}
	var store *redisstore.Store
	if mode == "shared" {
		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis), ContextTimeoutEnabled: true})
		defer rdb.Close()
		// The generous timeout newStore gives too: four processes under
		// -race on two cores can take longer than the default 100 ms for
		// a call, and a process that falls back for a while spends outside
		// the shared quota (a 429 in another process, 1 CI run in ~10).
		// This test is about sharing; failure_test.go is about outages.
		store = redisstore.New(rdb, redisstore.WithPrefix(os.Getenv(envPrefix)), redisstore.WithLogger(quiet),
			redisstore.WithTimeout(2*time.Second))
		defer func() { require.NoError(t, store.Close()) }()
		opts = append(opts, pacer.WithStore(store))
	}
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: pacer.NewTransport(tr, opts...)}

	fmt.Println(readyTag)
	var startNanos int64
	_, err = fmt.Fscanln(os.Stdin, &startNanos)
	require.NoError(t, err, "the start the parent sends once every process is ready")
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
