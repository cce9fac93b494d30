package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

// The situations of issue 12 ("what a response means"): a server clock off
// from the client's, a limit stated only in a 403's body, a quota gone for
// good, overload that is not quota, and many uncoordinated clients on one
// quota. Each is run, in virtual time against the in-memory apisim server,
// for pacer and the peers of the adapt command; pacer is held to the
// issue's targets, the peers are measured.
//
//	cd bench && go test ./adapt -run TestSituations -v                        # table in the log
//	cd bench && go test ./adapt -run TestSituations -args -situations.md $PWD/SITUATIONS.md
var situationsMD = flag.String("situations.md", "", "write the situations table to this markdown file")

// sitLatency is every simulated API's service time.
const sitLatency = 50 * time.Millisecond

// situation is one simulated API and workload.
type situation struct {
	name   string
	server apisim.Config
	// clients independent clients (each its own instance of the kind under
	// test, no Store between them) of workers goroutines each.
	clients, workers int
	// run is how long the workers loop; calls, when > 0, is instead a fixed
	// number of calls, shared by the workers.
	run   time.Duration
	calls int
	// refusal is the status of the refusals the row counts after the first
	// response: 429, or 403 for a secondary limit.
	refusal int
	// path is where the requests go ("/v1/x" when ""); a %d in it takes
	// the request's number, as ids in a REST path do.
	path string
	// spend, when not "", is a route (a Config.Routes prefix) that each
	// client spends before the run: its limit and one request more, one at
	// a time, each given a second (a client that waits for the reset
	// instead gives up).
	spend string
	// job rows are a job of calls requests judged by its time, not a
	// quota's goodput; saturated rows are held to a goodput and a share of
	// 429s (corpus_test.go). gap marks a job row pacer does not meet yet.
	job, saturated, gap bool
}

// sitRun is what one (situation, client) run measured.
type sitRun struct {
	requests, ok   int
	allowed        float64 // what the limit allowed during the run; 0: nothing could succeed
	refusedLate    int     // refusal-status responses to requests sent after the first response
	refusedAgain   int     // and after the server accepted again following its first refusal
	throttled      int     // 429s of the stated quota, all of them
	secondary      int     // secondary-limit responses, all of them
	shed, shedSeen int     // 503s the server shed, and the ones that reached the caller
	calls, errors  int     // caller-level calls (not cut off by the run's end), and those that ended in an error or non-2xx
	bodies         int     // calls whose caller got the refusal's body (insufficient_quota)
	// held is the time calls spent in the client after their first
	// response had arrived (retries, backoffs), summed over calls: 0 for a
	// client that hands every response over at once.
	held      time.Duration
	perClient []int // 2xx calls per client
	// elapsed is a job's time, from its first request (after the spending)
	// to its last answer; unpaced the same job's with no limiter and no
	// quota: rounds of workers requests, one latency each.
	elapsed, unpaced time.Duration
	// routeLate is the most 429s any one bucket gave after its own first
	// response (the spending included).
	routeLate int
}

func (r sitRun) goodput() float64 { return float64(r.ok) / r.allowed }

// jain is Jain's fairness index over the clients' successes: 1 when equal,
// 1/n when one client has everything.
func (r sitRun) jain() float64 {
	var sum, sq float64
	for _, x := range r.perClient {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(r.perClient)) * sq)
}

// situations are issue 12's table, one row each.
func situations() []situation {
	skew := func(d time.Duration) func() time.Time {
		return func() time.Time { return time.Now().Add(d) }
	}
	github := func(limit int, window time.Duration) apisim.Config {
		return apisim.Config{Style: apisim.StyleGitHub, Limit: limit, Window: window, Latency: sitLatency}
	}
	behind, ahead := github(600, time.Minute), github(600, time.Minute)
	behind.Now, ahead.Now = skew(-3*time.Second), skew(3*time.Second)
	secondary := github(5000, time.Hour)
	slowGitHub := github(1200, time.Minute)
	slowGitHub.Latency = 200 * time.Millisecond
	secondary.SecondaryLimit = 60
	shed := github(600, time.Minute)
	shed.ShedShare = 0.05
	// Issue 24's: a server that states nothing but Retry-After on its
	// 429s, over a token bucket; and a third of the quota spent by a
	// client no one sees, with the server's clock 3 s off.
	retryAfter := apisim.Config{Style: apisim.StyleRetryAfter, Algorithm: apisim.TokenBucket, Limit: 600, Window: time.Minute, Latency: sitLatency}
	unseenBehind, unseenAhead := github(600, time.Minute), github(600, time.Minute)
	unseenBehind.UnseenShare, unseenAhead.UnseenShare = 0.3, 0.3
	unseenBehind.Now, unseenAhead.Now = skew(-3*time.Second), skew(3*time.Second)
	return append([]situation{
		{name: "server clock 3 s behind", server: behind, clients: 1, workers: 32, run: 10 * time.Minute, refusal: 429},
		{name: "server clock 3 s ahead", server: ahead, clients: 1, workers: 32, run: 10 * time.Minute, refusal: 429},
		{name: "hidden secondary limit (60 a minute, 403 body only)", server: secondary, clients: 1, workers: 32, run: 20 * time.Minute, refusal: 403},
		{name: "insufficient_quota (429, headers show room)", server: apisim.Config{Style: apisim.StyleOpenAI, Limit: 500, Window: time.Minute, Latency: sitLatency, QuotaGone: true},
			clients: 1, workers: 32, calls: 320, refusal: 429},
		{name: "5% shed with a bare 503", server: shed, clients: 1, workers: 32, run: 10 * time.Minute, refusal: 429},
		{name: "10 uncoordinated clients on 1,200 a minute", server: github(1200, time.Minute), clients: 10, workers: 4, run: 10 * time.Minute, refusal: 429},
		{name: "50 uncoordinated clients on 1,200 a minute", server: github(1200, time.Minute), clients: 50, workers: 4, run: 10 * time.Minute, refusal: 429},
		{name: "50 uncoordinated clients of 8, 200 ms round trips", server: slowGitHub, clients: 50, workers: 8, run: 10 * time.Minute, refusal: 429},
		{name: "Retry-After only, token bucket of 600 a minute", server: retryAfter, clients: 1, workers: 32, run: 10 * time.Minute, refusal: 429},
		{name: "30% spent by an unseen client, server clock 3 s behind", server: unseenBehind, clients: 1, workers: 32, run: 10 * time.Minute, refusal: 429},
		{name: "30% spent by an unseen client, server clock 3 s ahead", server: unseenAhead, clients: 1, workers: 32, run: 10 * time.Minute, refusal: 429},
	}, corpusSituations()...)
}

// runSituation runs sit with clients of the given kind in a synctest bubble.
func runSituation(t *testing.T, sit situation, kind clientKind) sitRun {
	var r sitRun
	synctest.Test(t, func(t *testing.T) {
		srv := apisim.New(sit.server)
		tap := &refusalTap{base: srv.Transport(), refusal: sit.refusal}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if sit.calls > 0 {
			ctx, cancel = context.WithTimeout(ctx, time.Hour) // a bound, not expected to bind
			defer cancel()
		}
		start := time.Now()
		end := start.Add(sit.run)
		// The server counts its windows, and Capacity, in its own clock.
		serverStart := start
		if sit.server.Now != nil {
			serverStart = sit.server.Now()
		}
		serverEnd := serverStart.Add(sit.run)
		if sit.calls == 0 {
			tap.end = end
		}
		var mu sync.Mutex
		r.perClient = make([]int, sit.clients)
		var next, seq atomic.Int64
		var wg sync.WaitGroup
		clients := newSitClients(t, sit, kind, tap)
		jobStart := time.Now()
		for c, client := range clients {
			for range sit.workers {
				wg.Go(func() {
					for ctx.Err() == nil {
						if sit.calls > 0 && next.Add(1) > int64(sit.calls) {
							return
						}
						var first atomic.Int64 // set by the tap
						req, _ := http.NewRequestWithContext(context.WithValue(ctx, firstResponseKey{}, &first), http.MethodGet, "http://api.test"+sit.pathOf(seq.Add(1)), nil)
						resp, err := client.Do(req)
						var body []byte
						if err == nil {
							body, _ = io.ReadAll(resp.Body)
							resp.Body.Close()
						}
						if ctx.Err() != nil {
							return // cut off by the run's end
						}
						mu.Lock()
						r.count(c, first.Load(), resp, err, body)
						mu.Unlock()
						if err != nil {
							// A caller backs off a second after an error
							// (a refusal returned at once would otherwise
							// spin in place: virtual time only moves when
							// everyone waits).
							time.Sleep(time.Second)
						}
					}
				})
			}
		}
		if sit.calls == 0 {
			time.Sleep(time.Until(end))
			cancel()
		}
		wg.Wait()
		r.elapsed = time.Since(jobStart)
		r.unpaced = time.Duration((sit.calls+sit.workers-1)/sit.workers) * sitLatency
		if sit.job {
			r.routeLate = mostLateOnOneBucket(srv.Events(), sitLatency)
		}
		for _, c := range clients {
			c.CloseIdleConnections()
		}
		r.requests, r.refusedLate, r.refusedAgain = int(tap.requests.Load()), int(tap.late.Load()), int(tap.again.Load())
		r.ok, r.throttled = int(tap.status[0].Load()), int(tap.status[1].Load())
		r.secondary, r.shed = int(tap.status[2].Load()), int(tap.status[3].Load())
		r.allowed = sit.allowed(srv, serverStart, serverEnd)
	})
	return r
}

// newSitClients makes sit's clients of the given kind over tap, each
// having spent sit.spend (if any) before it returns.
func newSitClients(t *testing.T, sit situation, kind clientKind, tap http.RoundTripper) []*http.Client {
	documented := scenario{Quota: sit.server.Limit, Window: sit.server.Window} // what x/time/rate is set to
	var clients []*http.Client
	for range sit.clients {
		client, err := newClient(kind, tap, documented)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, client)
		if sit.spend != "" {
			spendRoute(client, sit.spend, sit.server.Routes[sit.spend])
		}
	}
	return clients
}

// count records one call of client c: its first response's arrival (unix
// nanoseconds, 0 for none), and what its caller got.
func (r *sitRun) count(c int, first int64, resp *http.Response, err error, body []byte) {
	r.calls++
	if first != 0 {
		r.held += time.Duration(time.Now().UnixNano() - first)
	}
	switch {
	case err != nil:
		r.errors++
	case resp.StatusCode/100 == 2:
		r.perClient[c]++
	default:
		r.errors++
		if resp.StatusCode == http.StatusServiceUnavailable {
			r.shedSeen++
		}
		if bytes.Contains(body, []byte(`"insufficient_quota"`)) {
			r.bodies++
		}
	}
}

// allowed is what sit's limit allowed from from to to in the server's
// clock: 0 where nothing could succeed or no quota's goodput is judged.
func (sit situation) allowed(srv *apisim.Server, from, to time.Time) float64 {
	switch {
	case sit.server.QuotaGone, sit.job:
		return 0
	case sit.server.SecondaryLimit > 0:
		window := sit.server.SecondaryWindow
		if window == 0 {
			window = time.Minute
		}
		return min(srv.Capacity(from, to), float64(sit.server.SecondaryLimit)*float64(sit.run)/float64(window))
	}
	return srv.Capacity(from, to)
}

// refusalTap sits between every client and the server and counts what the
// server answered to the requests sent before the run's end (the server's
// own Stats would also count the ones workers send at the very instant the
// run ends). It notes when the first response arrived and counts refusals
// to requests sent after it (the in-memory server admits a request the
// instant it is sent): the ones a client that learns from responses could
// have avoided.
type refusalTap struct {
	base    http.RoundTripper
	refusal int
	end     time.Time // zero: no end, count everything

	first    atomic.Int64 // unix nanoseconds of the first response; 0 before
	late     atomic.Int64
	requests atomic.Int64
	status   [4]atomic.Int64 // 200, 429, 403, 503

	// refused is when the first refusal arrived, reopened when the first
	// success to a request sent after it did (unix nanoseconds; 0 before);
	// again counts refusals to requests sent after reopened.
	refused, reopened, again atomic.Int64
}

func (t *refusalTap) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	t.first.CompareAndSwap(0, now)
	if call, ok := req.Context().Value(firstResponseKey{}).(*atomic.Int64); ok {
		call.CompareAndSwap(0, now)
	}
	if !t.end.IsZero() && !sent.Before(t.end) {
		return resp, nil
	}
	t.requests.Add(1)
	if i := slices.Index([]int{200, 429, 403, 503}, resp.StatusCode); i >= 0 {
		t.status[i].Add(1)
	}
	if resp.StatusCode == t.refusal && sent.UnixNano() >= t.first.Load() {
		t.late.Add(1)
	}
	switch at := t.refused.Load(); {
	case resp.StatusCode == t.refusal && at == 0:
		t.refused.CompareAndSwap(0, now)
	case resp.StatusCode == t.refusal:
		if r := t.reopened.Load(); r != 0 && sent.UnixNano() >= r {
			t.again.Add(1)
		}
	case resp.StatusCode/100 == 2 && at != 0 && sent.UnixNano() > at:
		t.reopened.CompareAndSwap(0, now)
	}
	return resp, nil
}

// firstResponseKey carries, in a call's context, when the first response
// to it arrived (unix nanoseconds, set by refusalTap).
type firstResponseKey struct{}

// TestSituations measures issue 12's situations for pacer and the peers and
// holds pacer to the targets (see sitTargets), or, where pacer does
// not meet one yet, to the bound it reliably keeps, the gap reported in the
// log and in the generated file.
func TestSituations(t *testing.T) {
	if raceEnabled && *situationsMD != "" {
		t.Fatal("-situations.md: generate without -race, which skips the peers")
	}
	var md, gaps strings.Builder
	gapWhat := map[string]string{}
	md.WriteString(situationsHeader + corpusHeader)
	if runs() > 1 {
		fmt.Fprintf(&md, "pacer's rows ran %d times each (each its own goroutine ordering): every figure is the median and, in brackets where it differs, the worst run's; pacer is held to the targets in every run. The peers ran once.\n\n", runs())
	}
	md.WriteString("| situation | client | goodput | refusals after the first response | caller errors | situation's own figure |\n")
	md.WriteString("| --- | --- | ---: | ---: | ---: | --- |\n")
	for _, sit := range situations() {
		for _, kind := range allClients() {
			t.Run(sit.name+"/"+string(kind), func(t *testing.T) {
				if raceEnabled && kind != clientPacer {
					// Peers are measured, not held to anything, and the
					// race detector makes their millions of requests
					// (net/http: 2.4 million with 50 clients) take minutes.
					t.Skip("peers run without -race")
				}
				rs := make([]sitRun, runs())
				if kind != clientPacer {
					rs = rs[:1] // measured, not held: once (net/http's 50 clients take a minute)
				}
				missed := map[string]int{} // a known gap's target: the runs that missed it
				var gapText []string
				for i := range rs {
					rs[i] = runSituation(t, sit, kind)
					if kind != clientPacer {
						continue
					}
					for _, c := range sitTargets(sit, rs[i]) {
						switch {
						case !c.held:
							t.Errorf("run %d of %d: %s (%s)", i+1, len(rs), c.what, c.want)
						case !c.met:
							t.Logf("run %d of %d: known gap: %s (the issue's target %s, held to %s)", i+1, len(rs), c.what, c.want, c.bound)
							key := c.want + "|" + c.bound
							if missed[key] == 0 {
								gapText = append(gapText, key)
							}
							missed[key]++
							gapWhat[sit.name+key] = c.what
						}
					}
				}
				row := sitRow(sit, rs)
				t.Logf("%s", strings.Join(row, ", "))
				fmt.Fprintf(&md, "| %s | %s | %s |\n", sit.name, kind, strings.Join(row, " | "))
				for _, key := range gapText {
					want, bound, _ := strings.Cut(key, "|")
					fmt.Fprintf(&gaps, "- %s: %s (missed in %d of %d runs; the last shown); the issue's target is %s, the test holds pacer to %s.\n",
						sit.name, gapWhat[sit.name+key], missed[key], len(rs), want, bound)
				}
			})
		}
	}
	if gaps.Len() == 0 {
		md.WriteString("\npacer meets every one of issue 12's targets above.\n")
	} else {
		md.WriteString("\n**Targets pacer does not meet yet** (the test holds it to the bound it reliably keeps, so a collapse still fails):\n\n")
		md.WriteString(gaps.String())
		md.WriteString(secondaryGapNote + corpusGapNote)
	}
	md.WriteString(situationsFooter)
	t.Log("\n" + md.String())
	if *situationsMD != "" {
		if err := os.WriteFile(*situationsMD, []byte(md.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sitRow is the runs' cells after the client's: goodput, refusals after the
// first response, caller errors, the situation's own figure; each the
// median and, where it differs, the worst (see spread).
func sitRow(sit situation, rs []sitRun) []string {
	f := func(format string, w worse, fig func(sitRun) float64) string { return spread(format, each(rs, fig), w) }
	median := func(fig func(sitRun) float64) float64 { m, _ := medianWorst(each(rs, fig), higherWorse); return m }
	goodput := "n/a"
	if rs[0].allowed > 0 {
		goodput = f("%.2f", lowerWorse, sitRun.goodput)
	}
	errors := f("%.0f", higherWorse, func(r sitRun) float64 { return float64(r.errors) }) +
		fmt.Sprintf(" of %.0f", median(func(r sitRun) float64 { return float64(r.calls) }))
	var own string
	switch {
	case sit.job:
		own = jobFigure(sit, rs, f)
	case sit.server.QuotaGone:
		own = f("%.2f", higherWorse, func(r sitRun) float64 { return float64(r.requests) / float64(max(1, r.calls)) }) + "; " +
			f("%.3fs", higherWorse, func(r sitRun) float64 { return (r.held / time.Duration(max(1, r.calls))).Seconds() }) + "; " +
			f("%.0f", lowerWorse, func(r sitRun) float64 { return float64(r.bodies) }) +
			fmt.Sprintf(" of %.0f", median(func(r sitRun) float64 { return float64(r.calls) }))
	case sit.server.SecondaryLimit > 0:
		own = f("%.0f", higherWorse, func(r sitRun) float64 { return float64(r.secondary) })
	case sit.server.ShedShare > 0:
		own = f("%.0f", higherWorse, func(r sitRun) float64 { return float64(r.shedSeen) }) +
			fmt.Sprintf(" of %.0f", median(func(r sitRun) float64 { return float64(r.shed) }))
	case sit.clients > 1:
		own = f("%.2f%%", higherWorse, func(r sitRun) float64 { return 100 * float64(r.throttled) / float64(max(1, r.requests)) }) + "; " +
			f("%.2f", lowerWorse, sitRun.jain)
	default:
		own = f("%.0f", higherWorse, func(r sitRun) float64 { return float64(r.throttled) })
	}
	return []string{goodput, f("%.0f", higherWorse, func(r sitRun) float64 { return float64(r.refusedLate) }), errors, own}
}

// sitCheck is one of issue 12's targets for one pacer run: whether it was
// met, and whether the run kept the bound the test holds pacer to (the
// target itself unless pacer does not meet it yet).
type sitCheck struct {
	what, want, bound string
	met, held         bool
}

// The bound pacer is held to on the hidden secondary limit's responses,
// above issue 12's ≤ 5, which it does not meet: every run sends 20 to 23
// requests into the limit, all sent before the first 403 arrived or at
// that very instant (see secondaryGapNote): the in-flight requests of
// one round of the 32 workers, less what the limit had left. None meets
// it once the server accepted again (held as a target of its own). Its
// goodput target (≥ 0.5) is held as is.
const secondaryHeldTrips = 32

// sitTargets checks pacer's run r of sit against issue 12's targets.
func sitTargets(sit situation, r sitRun) []sitCheck {
	var out []sitCheck
	// target: met is the target, held the bound the test keeps
	// (the same, but where a gap is known).
	target := func(what, want string, met bool, bound string, held bool) {
		out = append(out, sitCheck{what: what, want: want, bound: bound, met: met, held: held})
	}
	exact := func(what, want string, met bool) { target(what, want, met, want, met) }
	g := r.goodput()
	switch {
	case sit.job || sit.saturated:
		return corpusTargets(sit, r)
	case sit.server.Now != nil && sit.server.UnseenShare > 0: // issue 24
		exact(fmt.Sprintf("%d 429s after the first response", r.refusedLate), "0", r.refusedLate == 0)
		exact(fmt.Sprintf("goodput %.3f of what the unseen client leaves", g), "≥ 0.80", g >= 0.80)
	case sit.server.Now != nil: // clock skew
		exact(fmt.Sprintf("%d 429s after the first response", r.refusedLate), "0", r.refusedLate == 0)
		exact(fmt.Sprintf("goodput %.3f", g), "≥ 0.90", g >= 0.90)
	case sit.server.Style == apisim.StyleRetryAfter: // issue 24
		share := float64(r.throttled) / float64(max(1, r.requests))
		exact(fmt.Sprintf("goodput %.3f", g), "≥ 0.93", g >= 0.93)
		exact(fmt.Sprintf("%.2f%% 429s", 100*share), "≤ 1%", share <= 0.01)
	case sit.server.SecondaryLimit > 0:
		target(fmt.Sprintf("%d secondary-limit responses", r.secondary), "≤ 5", r.secondary <= 5,
			fmt.Sprintf("≤ %d", secondaryHeldTrips), r.secondary <= secondaryHeldTrips)
		exact(fmt.Sprintf("goodput %.3f of what the secondary limit allows", g), "≥ 0.5", g >= 0.5)
		// Issue 24: the trip's in-flight requests aside, none after.
		exact(fmt.Sprintf("%d secondary-limit responses once the server accepted again", r.refusedAgain), "0", r.refusedAgain == 0)
	case sit.server.QuotaGone:
		exact(fmt.Sprintf("%d requests for %d calls", r.requests, r.calls), "one each", r.requests == r.calls)
		exact(fmt.Sprintf("calls held %v in all after their response arrived", r.held), "0", r.held == 0)
		exact(fmt.Sprintf("%d of %d callers got the body", r.bodies, r.calls), "all", r.bodies == r.calls)
	case sit.server.ShedShare > 0:
		exact(fmt.Sprintf("goodput %.3f", g), "≥ 0.80", g >= 0.80)
	case sit.clients > 1:
		share := float64(r.throttled) / float64(max(1, r.requests))
		exact(fmt.Sprintf("goodput %.3f together", g), "≥ 0.80", g >= 0.80)
		exact(fmt.Sprintf("%.2f%% 429s", 100*share), "≤ 2%", share <= 0.02)
		exact(fmt.Sprintf("Jain fairness %.3f", r.jain()), "≥ 0.90", r.jain() >= 0.90)
	}
	return out
}

// secondaryGapNote says why pacer misses the secondary limit's target.
const secondaryGapNote = `
Why, on the hidden secondary limit: the limit is unknowable until it trips, and the primary quota's
headers say 4,999 of 5,000 left, so the 32 workers run unpaced (as they should below a quota): one
request goes alone at 0 s (the first look), 32 at 0.05 s and 32 at 0.1 s, of which the limit admits 27;
the other 5 meet the 403, and up to 27 more are sent at 0.15 s, the instant the first 403 arrives, by
workers whose answer arrived with it and was read before any 403 was (8 in all in the median run, 22 in the worst). How many is
arithmetic, not pacing: a round of 32 less what the limit had left, and the answers read before the
first 403 (with a first window of 16, 20 and 0 to 3). No general rule avoids it without pacing jobs far below a
quota: 5 requests in flight would keep it to 5 (and to 0.89 of what the limit allows), but make a job of
16 workers 3.2 times slower than unpaced. After the trip pacer waits GitHub's minute, counts the answers
of one burst as one trip, and paces evenly below what the server admitted from the first response until
it accepted again (the safety factor's share of it): it does not meet the limit again. Paced at the
whole of what it admitted (1.003 a second), it met it again at 190 s in every run (0.82).
`

// situationsHeader opens SITUATIONS.md.
const situationsHeader = `# What a response means: issue 12's situations

Generated by ` + "`cd bench && go test ./adapt -run TestSituations -args -situations.md $PWD/SITUATIONS.md`" + `
(virtual time, testing/synctest, against the in-memory internal/apisim server; do not edit by hand).
Every simulated API answers in 50 ms and sends ` + "`Date`" + ` in its own clock; GitHub-style fixed windows
with epoch-second resets unless said. 32 workers loop calls for 10 minutes (20 for the secondary limit);
the insufficient_quota row makes 320 calls instead; the uncoordinated rows run 10 or 50 clients of 4
workers each (one row 50 of 8 at 200 ms round trips), every client its own instance (no Store). A worker whose call ends in an error (not a
response) waits a second before the next. x/time/rate is set to the documented (header-stated) quota,
per client.

- **goodput**: successful requests ÷ what the limit allowed during the run (the stated quota; for the
  secondary limit, its 60 a minute). A client that ignores refusals can fill the quota while sending
  sixty times the requests it gets through: read goodput beside the refusals.
- **refusals after the first response**: 429s (403s for the secondary limit) to requests sent after the
  first response had arrived — the ones a client that reads responses could have avoided.
- **caller errors**: calls that ended in an error or a non-2xx response, of the calls made.
- **situation's own figure**: clock skew, 429s in all; secondary limit, its 403s in all; insufficient_quota,
  requests sent per call, the mean time a call spent in the client after its first response had arrived
  (retries and backoffs; pacing before the first attempt is not counted), and the calls whose caller got the
  body saying insufficient_quota; 5% shed, the shed 503s that reached the caller of those the server
  shed; uncoordinated clients, 429s ÷ requests and Jain's fairness index over the clients' successes.

The same test holds pacer to issue 12's targets on every run: clock skew ±3 s, 0 429s after the first
response and ≥ 0.90 of the quota; hidden secondary limit, ≤ 5 secondary-limit responses in 20 minutes at
≥ 0.5 of what it allows; insufficient_quota, exactly one request per call, returned at once with its body;
5% shed, ≥ 0.80 of the quota; 10 and 50 uncoordinated clients, ≥ 0.80 of the quota together, ≤ 2% 429s,
Jain fairness ≥ 0.90. And to issue 24's: a server that states nothing but Retry-After over a token
bucket, ≥ 0.93 of its long-run rate with ≤ 1% 429s; a third of the quota spent by a client no one sees,
with the server's clock 3 s off, 0 429s after the first response and ≥ 0.80 of what that client leaves.
The peers are measured, not held to anything.

`

// situationsFooter closes SITUATIONS.md.
const situationsFooter = `
The other tables: the saturated regime in [RESULTS.md](RESULTS.md), a client far below its quota in
[BELOW_QUOTA.md](BELOW_QUOTA.md).
`
