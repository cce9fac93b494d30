package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

// The situations that sessions recorded from real APIs show and the
// simulator long did not (issue 35): a host keeping a quota per route and
// naming none (X, Mastodon, Okta), Retry-After on successful answers
// (Anthropic, Hugging Face's inference router), resets restated on every
// answer (Reddit's delta seconds with decimal counts, Mastodon's instants
// carrying each request's own microseconds, gitlab.com's Date + 60 s).
// Each is a row of TestSituations, for pacer and every peer.
func corpusSituations() []situation {
	x := func(limit int, window time.Duration, spent int) apisim.Config {
		return apisim.Config{Style: apisim.StyleX, Limit: limit, Window: window, Latency: sitLatency,
			Routes: map[string]int{"/2/lists/": spent}}
	}
	// Mastodon's deletions: 30 per 30 minutes beside the API's 300 per 5
	// (its rack_attack throttles); apisim's routes share one window.
	mastodonRoutes := apisim.Config{Style: apisim.StyleMastodon, Limit: 300, Window: 5 * time.Minute, Latency: sitLatency,
		Routes: map[string]int{"/api/v1/statuses/": 30}}
	// Recorded on 200s: retry-after 31 from Anthropic beside quotas
	// nearly full, 30 from Hugging Face's router beside no rate field.
	anthropic := apisim.Config{Style: apisim.StyleAnthropic, Limit: 4000, Window: time.Minute, Latency: sitLatency,
		RetryAfterOnSuccess: 31 * time.Second}
	router := apisim.Config{Style: apisim.StyleBare, Limit: 1000, Window: time.Minute, Latency: sitLatency,
		RetryAfterOnSuccess: 30 * time.Second}
	// The quotas of the recorded sessions: Reddit 600 per 10 minutes,
	// Mastodon's API 300 per 5 minutes, gitlab.com 600 a minute.
	reddit := apisim.Config{Style: apisim.StyleReddit, Limit: 600, Window: 10 * time.Minute, Latency: sitLatency}
	mastodon := apisim.Config{Style: apisim.StyleMastodon, Limit: 300, Window: 5 * time.Minute, Latency: sitLatency}
	gitlab := apisim.Config{Style: apisim.StyleGitLab, Limit: 600, Window: time.Minute, Latency: sitLatency}
	route := func(name string, server apisim.Config, spend string, calls, workers int, path string) situation {
		return situation{name: name, server: server, clients: 1, workers: workers, calls: calls, refusal: 429,
			path: path, spend: spend, job: true}
	}
	job := func(name string, server apisim.Config, calls int) situation {
		return situation{name: name, server: server, clients: 1, workers: 16, calls: calls, refusal: 429, job: true}
	}
	// A gap: pacer does not meet the job's target yet (see corpusGapNote).
	gap := func(s situation) situation { s.gap = true; return s }
	saturated := func(name string, server apisim.Config, run time.Duration) situation {
		return situation{name: name, server: server, clients: 1, workers: 8, run: run, refusal: 429, saturated: true}
	}
	return []situation{
		route("a route with quota left beside a spent one: X-style, 15 of 300 a quarter-hour spent; 200 calls, 16 workers",
			x(300, 15*time.Minute, 15), "/2/lists/", 200, 16, "/2/users/%d/timelines"),
		route("a route with quota left beside a spent one: X-style, 50 of 900 a quarter-hour spent; 800 calls, 64 workers",
			x(900, 15*time.Minute, 50), "/2/lists/", 800, 64, "/2/users/%d/timelines"),
		route("a route with quota left beside a spent one: X-style, 1 of 300 a minute spent; 100 calls, 4 workers",
			x(300, time.Minute, 1), "/2/lists/", 100, 4, "/2/users/%d/timelines"),
		route("a route with quota left beside a spent one: Mastodon-style, deletions' 30 of 300 per 5 minutes spent; 200 calls, 16 workers",
			mastodonRoutes, "/api/v1/statuses/", 200, 16, "/api/v1/accounts/%d/statuses"),
		{name: "Retry-After: 31 on every 200, Anthropic-style 4,000 a minute; 400 calls, 16 workers", server: anthropic,
			clients: 1, workers: 16, calls: 400, refusal: 429, job: true},
		{name: "Retry-After: 30 on every 200, no rate field (Hugging Face's router); 400 calls, 16 workers", server: router,
			clients: 1, workers: 16, calls: 400, refusal: 429, job: true},
		job("Reddit-style below the quota: 300 calls of 600 per 10 minutes, 16 workers", reddit, 300),
		job("Reddit-style below the quota: 600 calls of 600 per 10 minutes, 16 workers", reddit, 600),
		job("Mastodon-style below the quota: 150 calls of 300 per 5 minutes, 16 workers", mastodon, 150),
		job("Mastodon-style below the quota: 300 calls of 300 per 5 minutes, 16 workers", mastodon, 300),
		job("GitLab-style below the quota: 300 calls of 600 a minute, 16 workers", gitlab, 300),
		gap(job("GitLab-style below the quota: 600 calls of 600 a minute, 16 workers", gitlab, 600)),
		saturated("Reddit-style: reset in delta seconds restated on every answer, decimal counts; 600 per 10 minutes, 8 workers, 30 minutes",
			reddit, 30*time.Minute),
		saturated("Mastodon-style: resets carrying each request's microseconds; 300 per 5 minutes, 8 workers, 15 minutes",
			mastodon, 15*time.Minute),
		saturated("GitLab-style: reset restated as Date + 60 s on every answer; 600 a minute, 8 workers, 10 minutes",
			gitlab, 10*time.Minute),
	}
}

// pathOf is the path of a situation's n-th request.
func (sit situation) pathOf(n int64) string {
	switch {
	case sit.path == "":
		return "/v1/x"
	case strings.Contains(sit.path, "%d"):
		return fmt.Sprintf(sit.path, n)
	}
	return sit.path
}

// spendRoute spends the quota of the route at prefix through client: limit
// requests and one more, one at a time, each given a second.
func spendRoute(client *http.Client, prefix string, limit int) {
	for i := range limit + 1 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://api.test%s%d/members", prefix, 1000+i), nil)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
	}
}

// mostLateOnOneBucket is the most 429s any one bucket answered to requests
// it admitted after its own first response (a request's response arrives
// latency after its admission).
func mostLateOnOneBucket(events []apisim.Event, latency time.Duration) int {
	first := map[string]time.Time{}
	late := map[string]int{}
	most := 0
	for _, e := range events {
		at, seen := first[e.Key]
		if !seen {
			first[e.Key] = e.At.Add(latency)
			continue
		}
		if e.Status == http.StatusTooManyRequests && !e.At.Before(at) {
			late[e.Key]++
			most = max(most, late[e.Key])
		}
	}
	return most
}

// jobFigure is a job row's own figure: the job's time ÷ its unpaced time
// and, beside a spent route, the most 429s one route gave after its first
// response.
func jobFigure(sit situation, rs []sitRun, f func(string, worse, func(sitRun) float64) string) string {
	own := f("%.2f×", higherWorse, func(r sitRun) float64 { return r.elapsed.Seconds() / r.unpaced.Seconds() })
	if sit.spend != "" {
		own += "; " + f("%.0f", higherWorse, func(r sitRun) float64 { return float64(r.routeLate) })
	}
	return own
}

// corpusTargets checks pacer's run r of a corpus situation against issue
// 35's targets: a job within its quota within 1.25× its unpaced time
// besides the first look (one round trip, issue 24), with no caller error
// and, beside a spent route, at most one 429 per route after the route's
// first response (the one that finds its quota spent); a saturated client
// at ≥ 0.90 of the quota with ≤ 1% of its requests refused after the first
// response.
func corpusTargets(sit situation, r sitRun) []sitCheck {
	var out []sitCheck
	exact := func(what, want string, met bool) {
		out = append(out, sitCheck{what: what, want: want, bound: want, met: met, held: met})
	}
	if sit.saturated {
		// ≥ 0.90 for Reddit's and Mastodon's resets (issue 35); GitLab's
		// restated reset, for which the issue sets none, is held to the
		// adaptation benchmark's every-style criterion (0.9 × safety 0.9).
		least := 0.90
		if sit.server.Style == apisim.StyleGitLab {
			least = minHeaderGoodput
		}
		share := float64(r.refusedLate) / float64(max(1, r.requests))
		exact(fmt.Sprintf("goodput %.3f", r.goodput()), fmt.Sprintf("≥ %.2f", least), r.goodput() >= least)
		exact(fmt.Sprintf("%.2f%% of requests refused after the first response", 100*share), "≤ 1%", share <= 0.01)
		return out
	}
	ratio := (r.elapsed - sitLatency).Seconds() / r.unpaced.Seconds()
	what := fmt.Sprintf("job %.2f× its unpaced time besides the first look", ratio)
	if sit.gap {
		// Held to no slower than 1.25× the quota's long-run rate: the
		// job spread over its share of the window and its last unit's
		// wait for the reset (R43), not beyond.
		paced := time.Duration(float64(sit.calls) * float64(sit.server.Window) / float64(sit.server.Limit))
		out = append(out, sitCheck{what: what, want: "≤ 1.25×", met: ratio <= 1.25,
			bound: fmt.Sprintf("≤ %v, 1.25× the %d calls at the quota's long-run rate", 5*paced/4, sit.calls),
			held:  r.elapsed <= 5*paced/4})
	} else {
		exact(what, "≤ 1.25×", ratio <= 1.25)
	}
	exact(fmt.Sprintf("%d caller errors", r.errors), "0", r.errors == 0)
	if sit.spend != "" {
		exact(fmt.Sprintf("%d 429s on one route after its first response", r.routeLate), "≤ 1", r.routeLate <= 1)
	}
	return out
}

// corpusGapNote says why pacer misses the corpus rows' job targets.
const corpusGapNote = `
Why, on the GitLab-style job of the whole quota (issue 35): gitlab.com restates its reset as Date + 60 s on
every answer, so the reset moves later a second a second, beyond any rounding. pacer's quota model cannot
tell that from a window that refills as it goes (a sliding window, a bucket) and reads it so: it spreads
what is left to the reset (rule R42) rather than spending it at once (about 2.2× unpaced), and in a few runs
in a hundred the noise of overtaken answers reads the quota as shared, whose last unit is spread to the
reset (R43): a window's wait. Letting what is left of any quota that refills go at once took this job to
1.5× (the last unit, kept by R41, waits for a look), but a fixed window misread as sliding then spends its
quota at once and looks every second until its reset (a stated quota beside GitHub's headers: 55 429s in a
minute), so R44 stays with the buckets that state their time to full. A job of half the quota goes at once
(1.05×). Reddit's and Mastodon's resets, which move only within a second (delta seconds rounded; an instant
carrying the request's microseconds), are read as the same reset restated and meet their targets. The row
holds pacer to 1.25× the job at the quota's long-run rate meanwhile (its last unit's wait for a window at
most), so a collapse beyond it still fails.
`

// corpusHeader describes the corpus rows in SITUATIONS.md.
const corpusHeader = `Issue 35's rows, what sessions recorded from real APIs show: a route with quota left beside a spent one on
a host that keeps a quota per route and names none (X-style, Mastodon-style), a job run beside it; Retry-After
on every 200 (Anthropic-style, and with no rate field as Hugging Face's router sends it); Reddit-style resets
in delta seconds with decimal counts, Mastodon-style resets carrying each request's microseconds and
GitLab-style resets restated as Date + 60 s, below the quota (a job) and saturated (8 workers for three
windows, or 30 minutes of Reddit's 10-minute window). A job row's own figure is the job's time ÷ its
unpaced time (rounds of its workers' requests, 50 ms each) and, beside a spent route, the most 429s one
route gave after its own first response; the route is spent first, by the same client, with its limit and
one request more, each given a second. Targets, on every run: a job within 1.25× its unpaced time besides
the first look, no caller error, at most one 429 per route after the route's first response (the one
that finds it spent); saturated, ≥ 0.90 of the quota (GitLab-style, for which the issue sets none, ≥ 0.81 as
in RESULTS.md) with ≤ 1% of the requests refused after the first response.

`
