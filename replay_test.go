package pacer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	_ "time/tzdata" // googleDayEnds's America/Los_Angeles, wherever the tests run

	"github.com/pacer-go/pacer/internal/recorded"
	"github.com/pacer-go/pacer/internal/response"
	"github.com/pacer-go/pacer/retry"
)

// The replay harness: sessions recorded from real APIs (../shared/data,
// other people's cassettes and issue reports, read from there and never
// copied here) replayed through the Transport at their recorded pace, in
// virtual time with the clock at each session's own Date. It holds pacer
// to three things, each a test below:
//   - every figure a response states is read as its provider documents it;
//   - a session nobody throttled is sent with no added wait and nothing
//     refused;
//   - after a response that asks for a wait, the next request waits what
//     was asked, no more.

// corpus returns the sessions to replay: the project's own, written from
// providers' documentation where the recordings are thin
// (testdata/sessions), and the recorded ones when the shared corpus is
// here; without it, the test says where it looked and replays its own.
func corpus(t *testing.T) []*recorded.Session {
	t.Helper()
	own, err := recorded.Load(filepath.Join("testdata", "sessions", "from-docs.json"), "docs")
	if err != nil {
		t.Fatal(err)
	}
	path, ok := recorded.Find()
	if !ok {
		t.Logf("the recorded sessions are not here (looked for %q: ../shared/data/real_headers.json beside the module, or $PACER_REPLAY_CORPUS): only the project's own sessions are replayed; the shared corpus is not copied into the project", path)
		return own
	}
	sessions, err := recorded.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	return append(sessions, own...)
}

// The gaps: sessions pacer does not yet replay right, each with why, per
// test. A gap is logged, not failed; a session listed that replays right
// fails, so that the lists only shrink. This is the gate every change to
// the model and the grammar passes.
var (
	readingGaps = gaps{}
	waitGaps    = gaps{}
	pacingGaps  = gaps{}
)

// gaps maps a session's name to why it is not replayed right yet.
type gaps map[string]string

// report records a way s is not replayed right: an error, or a log line
// when s is a known gap.
func (g gaps) report(t *testing.T, s *recorded.Session, format string, args ...any) {
	t.Helper()
	if _, gap := g[s.Name()]; gap {
		t.Logf("known gap: "+format, args...)
		return
	}
	t.Errorf(format, args...)
}

// ratchet fails when s, a known gap, reported nothing (reported is false):
// it is replayed right now, and its entry must go.
func (g gaps) ratchet(t *testing.T, s *recorded.Session, reported bool) {
	t.Helper()
	if why, gap := g[s.Name()]; gap && !reported {
		t.Errorf("%s replays right now (listed as a gap: %s): remove it from the list", s.Name(), why)
	}
}

// replayTable prints the harness's per-session tables when set
// (PACER_REPLAY_TABLE=1 go test -run TestReplay -v).
var replayTable = os.Getenv("PACER_REPLAY_TABLE") != ""

// readAt reads r as the Transport does (response.Read, under the
// Transport's default caps, with the session's clock-offset estimate clk),
// at now.
//
// A stream's first event is read as the Transport has it read, as the
// caller reads the body (response.Watch): what a refusal there says is the
// response's reading, beside what its headers say.
func readAt(r *recorded.Response, now time.Time, clk *response.Clock) (Info, *response.Meaning) {
	req, _ := http.NewRequest(r.Method, r.URL, nil)
	var m response.Meaning
	resp := r.HTTP(req)
	caps := capsOf(DefaultMaxDelay)
	response.Read(&m, resp, now, caps, clk)
	var late *response.Meaning
	if response.Stream(resp) {
		response.Watch(resp, caps, clk, func() time.Time { return now }, func(s *response.Meaning) { late = s })
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	info := infoOf(m.Info, &m.Quotas)
	if late != nil {
		m.Throttled, m.Body = late.Throttled, late.Body
		info.RetryAfter = max(info.RetryAfter, late.RetryAfter)
		info.Quotas = append(info.Quotas, infoOf(late.Info, &late.Quotas).Quotas...)
	}
	return info, &m
}

// figureTol is how far a reset read may be from the one documented: the
// Date the corpus's documented resets are computed from has a resolution of
// one second, and a replay's round trip moves when a response is read.
const figureTol = 1500 * time.Millisecond

// TestReplayReadsEveryStatedFigure: each quota a recorded response states
// (its limit, what is left, its reset, its window, its unit) is read as the
// provider documents it, and nothing else is read as a quota; so are the
// wait it asks for and whether it refused the request.
func TestReplayReadsEveryStatedFigure(t *testing.T) {
	sessions := corpus(t)
	total, right := 0, 0
	byProvider := map[string][2]int{}
	for _, s := range sessions {
		t.Run(s.Name(), func(t *testing.T) {
			var clk response.Clock
			reported := false
			sched := s.Schedule(0)
			start := s.Start(0)
			for i := range s.Responses {
				r := &s.Responses[i]
				now := start.Add(sched[i]) // at its Date: figures are read in the server's time
				info, m := readAt(r, now, &clk)
				problems := compareReading(s, r, now, info, m)
				n := len(r.Want.Quotas)
				bad := min(len(problems), n)
				total += n
				right += n - bad
				c := byProvider[s.Provider]
				byProvider[s.Provider] = [2]int{c[0] + n - bad, c[1] + n}
				for _, p := range problems {
					readingGaps.report(t, s, "response %d (%d %s %s): %s", i, r.Status, r.Method, r.URL, p)
				}
				reported = reported || len(problems) > 0
			}
			readingGaps.ratchet(t, s, reported)
		})
	}
	if replayTable {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range byProvider {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			t.Logf("%-24s %4d of %4d figures read right", k, byProvider[k][0], byProvider[k][1])
		}
	}
	t.Logf("%d of %d stated figures read right", right, total)
}

// compareReading lists how what was read of r differs from what its
// provider documents.
func compareReading(s *recorded.Session, r *recorded.Response, now time.Time, info Info, m *response.Meaning) []string {
	var problems []string
	used := make([]bool, len(info.Quotas))
	for _, f := range r.Want.Quotas {
		best, why := -1, "no quota read"
		for j, q := range info.Quotas {
			if used[j] {
				continue
			}
			if d := figureDiff(s, r, f, q, now); d == "" {
				best = j
				break
			} else if best < 0 && (q.Limit == f.Limit || q.Remaining == f.Remaining) {
				why = d
			}
		}
		if best < 0 {
			problems = append(problems, fmt.Sprintf("quota %q (%s): %s; read %s", f.Name, figureString(f), why, quotasString(info.Quotas)))
			continue
		}
		used[best] = true
	}
	for j, q := range info.Quotas {
		if !used[j] && !unstatedQuotaAllowed(r, q) {
			problems = append(problems, fmt.Sprintf("read a quota the response does not state: %s", quotaString(q)))
		}
	}
	if m.Throttled != r.Want.Throttled && r.StatusKnown && !tooLargeIsNoThrottle(r, m) {
		problems = append(problems, fmt.Sprintf("throttled: read %v, documented %v", m.Throttled, r.Want.Throttled))
	}
	switch want := r.Want.RetryAfter; {
	case want < 0 && info.RetryAfter != 0:
		problems = append(problems, fmt.Sprintf("read a wait of %v where none is asked for", info.RetryAfter))
	case want >= 0 && math.Abs(info.RetryAfter.Seconds()-want) > 0.001:
		problems = append(problems, fmt.Sprintf("wait: read %v, documented %gs", info.RetryAfter, want))
	}
	return problems
}

// unstatedQuotaAllowed reports whether q, read from r but documented
// nowhere in r's reading, is a quota r does state whose figures the corpus
// left out: a figure with no count (Azure's scrubbed values) documents that
// the quota exists with nothing known of it.
func unstatedQuotaAllowed(r *recorded.Response, q Quota) bool {
	return q.Limit == 0 && q.Remaining < 0
}

// The rules by which a reading may differ from the corpus's, each for a
// reason the corpus itself gives:
//
//   - violationSpent: a quota Google's QuotaFailure lists as violated is
//     read as spent (Remaining 0). google.rpc.QuotaFailure describes "how a
//     quota check failed": the server refused the request against that
//     quota. The corpus documents the remaining of session 50's violations
//     as 0 ("implied by the violation") and of session 49's as unknown;
//     pacer reads both alike, as spent, so that the limiter holds the next
//     request to the wait the refusal states rather than finding the limit
//     again.
//   - googleDayEnds: a Google per-day quota resets at midnight Pacific time
//     ("Requests per day (RPD) quotas reset at midnight Pacific time",
//     https://ai.google.dev/gemini-api/docs/rate-limits). pacer reads that
//     reset where a response states none, so that a spent daily quota holds
//     requests until it, not for the seconds its RetryInfo names; the corpus
//     documents only what the response states (none), and session 50's
//     summary asks for the hold until midnight Pacific.
//   - tooLargeIsNoThrottle: a request larger than the whole limit that
//     refused it (the corpus's never_satisfiable) is no throttle by pacer's
//     rule, a refusal a wait lifts (response.Meaning.Throttled), and reads
//     as Body TooLarge: not retried, no pause. The corpus documents the
//     refusal as throttled.

// violationSpent: see above.
func violationSpent(r *recorded.Response, f recorded.Figure, q Quota) bool {
	return f.Remaining < 0 && q.Remaining == 0 && q.Name == f.Name && strings.Contains(r.Body, "google.rpc.QuotaFailure")
}

// googleDayEnds: see above. q's reset must be the first midnight in
// America/Los_Angeles after now (the time zone database is embedded in the
// test binary: time/tzdata).
func googleDayEnds(s *recorded.Session, f recorded.Figure, q Quota, now time.Time) bool {
	if !strings.HasPrefix(s.Provider, "google") || f.HasReset || q.Window != 24*time.Hour || q.Reset.IsZero() {
		return false
	}
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		return false
	}
	local := now.In(la)
	midnight := time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, la)
	d := q.Reset.Sub(midnight)
	return d <= figureTol && d >= -figureTol
}

// tooLargeIsNoThrottle: see above.
func tooLargeIsNoThrottle(r *recorded.Response, m *response.Meaning) bool {
	return r.Want.Throttled && r.Want.NeverSatisfiable && !m.Throttled && m.Body == response.TooLarge
}

// figureDiff says how q, read from r, differs from f, read at now; "" when
// it does not.
func figureDiff(s *recorded.Session, r *recorded.Response, f recorded.Figure, q Quota, now time.Time) string {
	if f.Limit >= 0 && q.Limit != f.Limit {
		return fmt.Sprintf("limit %g, documented %g", q.Limit, f.Limit)
	}
	if f.Remaining >= 0 && q.Remaining != f.Remaining {
		return fmt.Sprintf("remaining %g, documented %g", q.Remaining, f.Remaining)
	}
	if f.Remaining < 0 && q.Remaining >= 0 && !violationSpent(r, f, q) {
		return fmt.Sprintf("remaining %g, documented unknown", q.Remaining)
	}
	if d := resetDiff(f, q, now); d != "" && !googleDayEnds(s, f, q, now) {
		return d
	}
	if f.Window >= 0 && q.Window != 0 && math.Abs(q.Window.Seconds()-f.Window) > 0.5 {
		return fmt.Sprintf("window %v, documented %gs", q.Window, f.Window)
	}
	if f.Window >= 0 && q.Window == 0 && windowStated[s.Provider] {
		return fmt.Sprintf("no window read, documented %gs", f.Window)
	}
	if want := unitOf(f.Unit); want >= 0 && Unit(want) != q.Unit {
		return fmt.Sprintf("unit %v, documented %s", q.Unit, f.Unit)
	}
	return ""
}

// windowStated names the providers whose responses (or documented header
// convention) state their quotas' windows: a reading of theirs must have
// the window. Elsewhere the corpus infers windows from the docs or from
// resets, and a reading need not.
var windowStated = map[string]bool{
	"docker-hub":   true, // ratelimit-limit: 200;w=21600
	"cloudflare":   true, // RateLimit-Policy w=
	"huggingface":  true, // RateLimit-Policy w=
	"hubspot":      true, // -Daily, -Secondly, -Interval-Milliseconds
	"strava":       true, // the pair is 15-minute, daily (developers.strava.com)
	"azure-openai": true, // x-ratelimit-renewalperiod-*
	"mistral":      true, // -minute, -month
}

// unitOf is the Unit a documented unit counts in; -1 where either will do
// (GitHub's GraphQL points).
func unitOf(u string) int {
	switch u {
	case "tokens", "percent":
		return int(UnitTokens)
	case "requests", "pulls", "":
		return int(UnitRequests)
	}
	return -1
}

// resetDiff says how q's reset differs from f's, read at now; "" when it
// does not.
func resetDiff(f recorded.Figure, q Quota, now time.Time) string {
	switch {
	case !f.HasReset && !q.Reset.IsZero():
		return fmt.Sprintf("reset in %v, documented none", q.Reset.Sub(now).Round(time.Millisecond))
	case !f.HasReset:
		return ""
	case q.Reset.IsZero():
		return "no reset read"
	}
	want := f.ResetAt
	if want.IsZero() {
		want = now.Add(time.Duration(f.ResetAfter * float64(time.Second)))
	}
	if want.Before(now) {
		want = now // a reset past is now
	}
	if d := q.Reset.Sub(want); d > figureTol || d < -figureTol {
		return fmt.Sprintf("reset in %v, documented %v", q.Reset.Sub(now).Round(time.Millisecond), want.Sub(now).Round(time.Millisecond))
	}
	return ""
}

func figureString(f recorded.Figure) string {
	var b strings.Builder
	fmt.Fprintf(&b, "limit %g remaining %g", f.Limit, f.Remaining)
	if !f.ResetAt.IsZero() {
		fmt.Fprintf(&b, " reset %s", f.ResetAt.Format(time.RFC3339))
	} else if f.ResetAfter >= 0 {
		fmt.Fprintf(&b, " reset in %gs", f.ResetAfter)
	}
	if f.Window >= 0 {
		fmt.Fprintf(&b, " window %gs", f.Window)
	}
	return b.String() + " " + f.Unit
}

func quotaString(q Quota) string {
	s := fmt.Sprintf("{%q limit %g remaining %g", q.Name, q.Limit, q.Remaining)
	if !q.Reset.IsZero() {
		s += " reset " + q.Reset.UTC().Format(time.RFC3339Nano)
	}
	if q.Window != 0 {
		s += fmt.Sprintf(" window %v", q.Window)
	}
	return s + " " + q.Unit.String() + "}"
}

func quotasString(qs []Quota) string {
	if len(qs) == 0 {
		return "none"
	}
	parts := make([]string, len(qs))
	for i, q := range qs {
		parts[i] = quotaString(q)
	}
	return strings.Join(parts, ", ")
}

// replayed is what one request of a replayed session met.
type replayed struct {
	intended time.Time // when the recorded client sent it
	called   time.Time // when the replay sent it: intended, or when the one before returned if later
	arrived  time.Time // when it reached the server; zero if it never did
	done     time.Time // when the Transport returned
	err      error
}

// held is how long the Transport held the request before sending it (or
// refusing it).
func (r replayed) held() time.Duration {
	if r.arrived.IsZero() {
		return r.done.Sub(r.called)
	}
	return r.arrived.Sub(r.called)
}

// replayPatience is how long a replayed request waits at most: longer than
// any wait a recorded response asks of the next request of its route (a
// minute), shorter than a spent quota's window (refused at once, naming
// when it comes back), so that the requests after it are sent at their
// recorded times.
const replayPatience = 2 * time.Minute

// replaySession sends s's requests through a Transport made with opts, one
// after another at their recorded times (each at once if the one before
// returned late), and returns what each met. Retries are off: the recorded
// client's own retries are in the session.
func replaySession(t *testing.T, s *recorded.Session, lat time.Duration, opts ...Option) []replayed {
	t.Helper()
	out := make([]replayed, len(s.Responses))
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(s.Start(lat)))
		start := time.Now()
		srv := recorded.NewServer(s, lat)
		tr := NewTransport(srv, append([]Option{WithRetry(retry.Policy{Max: retry.None})}, opts...)...)
		defer tr.CloseIdleConnections()
		for i, at := range s.Schedule(lat) {
			time.Sleep(time.Until(start.Add(at)))
			r := &s.Responses[i]
			out[i].intended, out[i].called = start.Add(at), time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), replayPatience)
			req, _ := http.NewRequestWithContext(ctx, r.Method, r.URL, nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				drainAndClose(resp)
			}
			cancel()
			out[i].done, out[i].err = time.Now(), err
			if arr := srv.Arrived(); len(arr) > i {
				out[i].arrived = arr[i]
			}
			if err != nil && !isRateLimitError(err) {
				t.Fatalf("request %d: %v", i, err)
			}
			if len(srv.Arrived()) != min(i+1, len(s.Responses)) && err == nil {
				t.Fatalf("request %d: the Transport sent %d requests for %d", i, len(srv.Arrived()), i+1)
			}
			// A request refused is not sent: the server's next response
			// answers the next request.
			if err != nil {
				srv.Skip()
			}
		}
	})
	return out
}

// throttledSession reports whether any response of s refused a request or
// asked for a wait.
func throttledSession(s *recorded.Session) bool {
	for _, r := range s.Responses {
		if r.Want.Throttled || r.Want.RetryAfter > 0 || drainedFigure(r) {
			return true
		}
	}
	return false
}

// drainedFigure reports whether r states a quota with nothing left.
func drainedFigure(r recorded.Response) bool {
	for _, f := range r.Want.Quotas {
		if f.Remaining >= 0 && f.Remaining < 1 {
			return true
		}
	}
	return false
}

// TestReplayHoldsNoSessionNobodyThrottled: a session whose server refused
// nothing and asked for no wait goes through the Transport at its recorded
// pace with at most a second of added wait in all, and nothing refused:
// never slower than no limiter while the quota affords the work.
func TestReplayHoldsNoSessionNobodyThrottled(t *testing.T) {
	var mu sync.Mutex
	var rows []string
	for _, s := range corpus(t) {
		if throttledSession(s) || len(s.Responses) < 2 {
			continue
		}
		t.Run(s.Name(), func(t *testing.T) {
			reported := false
			for _, lat := range recorded.Latencies {
				got := replaySession(t, s, lat)
				var sum, worst time.Duration
				refused := 0
				for i, r := range got {
					sum += r.held()
					worst = max(worst, r.held())
					if r.err != nil {
						refused++
						reported = true
						pacingGaps.report(t, s, "round trip %v: request %d (%s %s) refused: %v", lat, i, s.Responses[i].Method, s.Responses[i].URL, r.err)
					}
				}
				if sum > time.Second {
					reported = true
					pacingGaps.report(t, s, "round trip %v: added wait %v in all over %d requests (the longest %v); at most 1s", lat, sum, len(got), worst)
				}
				mu.Lock()
				rows = append(rows, fmt.Sprintf("%-22s rtt %-6v %3d requests  added wait %8v  longest %8v  refused %d", s.Name(), lat, len(got), sum.Round(time.Millisecond), worst.Round(time.Millisecond), refused))
				mu.Unlock()
			}
			pacingGaps.ratchet(t, s, reported)
		})
	}
	if replayTable {
		for _, r := range rows {
			t.Log(r)
		}
	}
}

// statedEnd is when the wait a response asks for ends, for a response that
// arrived at at: its Retry-After, else the reset of a quota it states as
// spent. ok is false when it asks for no wait, or states none it can be
// held to (a refusal that names no time).
func statedEnd(r *recorded.Response, at time.Time) (time.Time, bool) {
	if r.Want.RetryAfter > 0 {
		return at.Add(time.Duration(r.Want.RetryAfter * float64(time.Second))), true
	}
	var end time.Time
	for _, f := range r.Want.Quotas {
		if f.Remaining < 0 || f.Remaining >= 1 || !f.HasReset {
			continue
		}
		e := f.ResetAt
		if e.IsZero() {
			e = at.Add(time.Duration(f.ResetAfter * float64(time.Second)))
		}
		end = later(end, e)
	}
	return end, !end.IsZero()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestReplayWaitsWhatAThrottledSessionWasTold: after a response that asks
// for a wait (a Retry-After, or a quota it states as spent until a reset),
// the next request is held until the wait ends and no longer (or refused
// at once, naming the wait's end), give or take the resolution of the
// server's times.
func TestReplayWaitsWhatAThrottledSessionWasTold(t *testing.T) {
	for _, s := range corpus(t) {
		if !throttledSession(s) || len(s.Responses) < 2 {
			continue
		}
		t.Run(s.Name(), func(t *testing.T) {
			reported := false
			for _, lat := range recorded.Latencies {
				reported = checkWaits(t, s, lat, replaySession(t, s, lat)) || reported
			}
			waitGaps.ratchet(t, s, reported)
		})
	}
}

// routeOf is r's request as a route (its host, method and path template).
func routeOf(r *recorded.Response) string {
	u, err := url.Parse(r.URL)
	if err != nil {
		return r.URL
	}
	return u.Host + " " + routeTemplate(r.Method, u.Path)
}

// checkWaits reports (and says whether it reported) every request of s,
// replayed at round trip lat, that waited other than as the responses
// before it asked: after a response that asks for a wait, the next
// request of its route waits until the wait ends, no longer; a request of
// a route no response asked to wait is not held at all.
func checkWaits(t *testing.T, s *recorded.Session, lat time.Duration, got []replayed) (reported bool) {
	t.Helper()
	asked := map[string]time.Time{} // per route, the end of the wait its responses asked for
	unknown := map[string]bool{}    // routes whose waits the replay cannot know
	for i := range got {
		r, cur := &s.Responses[i], got[i]
		route := routeOf(r)
		switch end, waited := asked[route]; {
		case i == 0 || unknown[route]:
		case waited && end.After(cur.called):
			reported = checkWait(t, s, lat, i, cur, end) || reported
		case cur.held() > figureTol || cur.err != nil:
			reported = true
			waitGaps.report(t, s, "round trip %v: request %d (%s) held %v (%v), though no response asked its route to wait", lat, i, route, cur.held().Round(time.Millisecond), cur.err)
		}
		switch end, ok := statedEnd(r, cur.arrived.Add(lat)); {
		case cur.arrived.IsZero():
			// Refused: the server said nothing.
		case cur.arrived.Sub(cur.intended) > figureTol:
			// Sent well after its recorded time, it got the answer the
			// server gave then, whose waits are stale.
			unknown[route] = true
		case ok:
			asked[route] = end
		case r.Want.Throttled || drainedFigure(*r):
			unknown[route] = true // a refusal or a spent quota that names no time
		}
	}
	return reported
}

// checkWait reports whether request i of s, cur, waited other than until
// end, the end of the wait a response before it asked for.
func checkWait(t *testing.T, s *recorded.Session, lat time.Duration, i int, cur replayed, end time.Time) bool {
	t.Helper()
	if rle := (*RateLimitError)(nil); errors.As(cur.err, &rle) {
		if d := rle.RetryAt.Sub(end); d > figureTol || d < -figureTol {
			waitGaps.report(t, s, "round trip %v: request %d refused until %v; a response asked for a wait until %v", lat, i, rle.RetryAt.UTC(), end.UTC())
			return true
		}
		return false
	}
	if d := cur.arrived.Sub(end); d > figureTol || d < -figureTol {
		waitGaps.report(t, s, "round trip %v: request %d held %v, %v after the wait a response asked for ended", lat, i, cur.held().Round(time.Millisecond), d.Round(time.Millisecond))
		return true
	}
	return false
}
