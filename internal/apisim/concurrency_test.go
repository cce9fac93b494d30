package apisim

import (
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// sendAtOnce sends n requests together through rt and returns each one's
// status and duration, in no particular order.
func sendAtOnce(t *testing.T, rt http.RoundTripper, n int) (statuses []int, took []time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/x", nil)
			start := time.Now()
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			statuses = append(statuses, resp.StatusCode)
			took = append(took, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	return statuses, took
}

// The i-th of n requests sent together finds i in progress: it takes
// Latency × max(1, i/Knee), so the last of 3× the knee takes 3× as long
// and the server still completes Knee per Latency.
func TestConcurrencyServerServesTheKneeAtItsLatencyAndQueuesBeyond(t *testing.T) {
	for _, n := range []int{4, 12} {
		synctest.Test(t, func(t *testing.T) {
			s := NewConcurrency(ConcurrencyConfig{Latency: 100 * time.Millisecond, Knee: 4}, nil)
			statuses, took := sendAtOnce(t, s.Transport(), n)
			slices.Sort(took)
			for i := range took {
				want := time.Duration(max(1, float64(i+1)/4) * float64(100*time.Millisecond))
				if statuses[i] != http.StatusOK || took[i] != want {
					t.Errorf("%d at once: arrival %d got %d in %v, want 200 in %v", n, i+1, statuses[i], took[i], want)
				}
			}
			if st := s.Stats(); st.Served != n || st.MaxInFlight != n || s.InFlight() != 0 {
				t.Errorf("stats %+v, in flight %d", st, s.InFlight())
			}
		})
	}
}

func TestConcurrencyServerShedsAboveItsCeilingAndStatesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewConcurrency(ConcurrencyConfig{Latency: time.Second, Knee: 4, Ceiling: 6, StateCeiling: true, Shed: 529}, nil)
		statuses, _ := sendAtOnce(t, s.Transport(), 10)
		count := map[int]int{}
		for _, st := range statuses {
			count[st]++
		}
		if count[200] != 6 || count[529] != 4 {
			t.Errorf("statuses %v, want 6 served and 4 shed with 529", count)
		}
		if st := s.Stats(); st.Shed != 4 || st.MaxInFlight != 6 {
			t.Errorf("stats %+v", st)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/x", nil)
		resp, err := s.Transport().RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got, want := resp.Header.Get("RateLimit-Policy"), `"concurrency";q=6;qu="concurrent-requests"`; got != want {
			t.Errorf("RateLimit-Policy %q, want %q", got, want)
		}
	})
}

func TestConcurrencyServerReportsWhenTheRequestWasWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewConcurrency(ConcurrencyConfig{Latency: 50 * time.Millisecond, Knee: 1}, New(Config{Style: StyleIETF, Limit: 10, Window: time.Minute}))
		var wrote, first time.Time
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
			WroteRequest:         func(httptrace.WroteRequestInfo) { wrote = time.Now() },
			GotFirstResponseByte: func() { first = time.Now() },
		})
		time.Sleep(time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/x", nil)
		resp, err := s.Transport().RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := first.Sub(wrote); got != 50*time.Millisecond || wrote.IsZero() {
			t.Errorf("written at %v, first byte %v later; want 50ms", wrote, got)
		}
		if resp.Header.Get("RateLimit-Policy") == "" {
			t.Error("the quota server's headers are missing")
		}
	})
}

func TestConcurrencyServerJitterKeepsTheMeanLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewConcurrency(ConcurrencyConfig{Latency: time.Second, Knee: 1000, Jitter: 0.5, Seed: 7}, nil)
		_, took := sendAtOnce(t, s.Transport(), 1000)
		var sum time.Duration
		lo, hi := took[0], took[0]
		for _, d := range took {
			sum += d
			lo, hi = min(lo, d), max(hi, d)
		}
		if mean := sum / time.Duration(len(took)); mean < 900*time.Millisecond || mean > 1100*time.Millisecond {
			t.Errorf("mean %v, want about 1s", mean)
		}
		if lo > 600*time.Millisecond || hi < 1500*time.Millisecond {
			t.Errorf("range %v to %v: no spread", lo, hi)
		}
	})
}

func TestNewConcurrencyPanicsNamingTheField(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || r.(string) != "apisim: invalid ConcurrencyConfig.Knee 0: must be ≥ 1" {
			t.Errorf("panic %v", r)
		}
	}()
	NewConcurrency(ConcurrencyConfig{Latency: time.Second}, nil)
}
