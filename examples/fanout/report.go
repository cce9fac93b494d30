package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/internal/apisim"
)

// styleNames are the human names of the header styles, for the intro line.
var styleNames = map[apisim.Style]string{
	apisim.StyleGitHub:     "GitHub-style (X-RateLimit-*)",
	apisim.StyleIETF:       "IETF RateLimit/RateLimit-Policy",
	apisim.StyleIETF07:     "IETF draft-07 RateLimit",
	apisim.StyleOpenAI:     "OpenAI-style (x-ratelimit-*-requests)",
	apisim.StyleAnthropic:  "Anthropic-style (anthropic-ratelimit-*)",
	apisim.StyleDiscord:    "Discord-style (X-RateLimit-*, buckets)",
	apisim.StyleShopify:    "Shopify-style (call-limit leaky bucket)",
	apisim.StyleRetryAfter: "Retry-After-only",
	apisim.StyleBare:       "bare-429",
}

// algorithmOf is the counting algorithm the server uses: apisim's default
// for the style unless -algorithm says otherwise.
func algorithmOf(cfg config) apisim.Algorithm {
	switch {
	case cfg.Algorithm != "":
		return cfg.Algorithm
	case cfg.Style == apisim.StyleShopify:
		return apisim.TokenBucket
	}
	return apisim.FixedWindow
}

// quotaRate is the quota in requests per second.
func quotaRate(cfg config) float64 { return float64(cfg.Quota) / cfg.Window.Seconds() }

func printIntro(out io.Writer, cfg config, addr string) {
	via := "pacer Executor + pacer Transport (zero-config"
	if cfg.Safety != defaults().Safety {
		via = fmt.Sprintf("pacer Executor + pacer Transport (safety factor %g", cfg.Safety)
	}
	via += ")"
	if cfg.Client == clientPlain {
		via = "pacer Executor + a plain http.Client (no rate limiting)"
	}
	fmt.Fprintf(out, "fanout: %d requests, %d at a time, via %s\n", cfg.N, cfg.Concurrency, via)
	fmt.Fprintf(out, "server: %s API on %s, %d requests per %v (%s) = %.1f req/s, %v per request\n",
		styleNames[cfg.Style], addr, cfg.Quota, cfg.Window, algorithmOf(cfg), quotaRate(cfg), cfg.Latency)
	if cfg.Unseen > 0 {
		fmt.Fprintf(out, "        another client, invisible to this one, spends %.0f%% of the quota\n", 100*cfg.Unseen)
	}
	fmt.Fprintln(out)
}

// printSummary tells what happened in a few lines: from the caller's side,
// then the server's, then what pacer ended up doing.
func printSummary(out io.Writer, cfg config, r result) {
	secs := r.Elapsed.Seconds()
	fmt.Fprintf(out, "done: %d/%d requests succeeded in %v\n", r.Succeeded, cfg.N, r.Elapsed.Round(100*time.Millisecond))

	switch {
	case r.Elapsed < cfg.Window && r.Goodput() > 1:
		// Allowed counts a window's quota as spread over the window; a run
		// shorter than one can spend the fresh quota far faster.
		fmt.Fprintf(out, "  goodput   %d requests in less than one %v window, which starts full\n", r.Server.OK, cfg.Window)
	case r.Allowed > 0 && secs > 0:
		fmt.Fprintf(out, "  goodput   %.1f req/s = %.2f × quota (%.0f requests allowed in the run)\n",
			float64(r.Server.OK)/secs, r.Goodput(), r.Allowed)
	}

	fmt.Fprintf(out, "  server    saw %d requests, answered %s\n", r.Server.Requests, throttleStory(cfg, r))

	var caller []string
	caller = append(caller, plural(r.Errors, "error"))
	if r.Rejected > 0 {
		caller = append(caller, fmt.Sprintf("%d requests failed with a 429 they were handed back", r.Rejected))
	}
	if cfg.Client == clientPacer {
		caller = append(caller, plural(int(r.Retries), "retry"))
	}
	fmt.Fprintf(out, "  caller    %s\n", strings.Join(caller, ", "))
	if r.FirstErr != nil {
		kind := ""
		if errorsIsRateLimit(r.FirstErr) {
			kind = " (pacer refused: the wait would have passed the deadline)"
		}
		fmt.Fprintf(out, "            first error: %v%s\n", r.FirstErr, kind)
	}

	for _, ep := range r.Endpoints {
		if moved := movedTo(ep.Key, r.Endpoints); moved != "" {
			// The server named its bucket (X-RateLimit-Resource or -Bucket):
			// the host's limiter handed its routes over to that bucket's.
			fmt.Fprintf(out, "  endpoint  %s: %s, then its requests moved to the server-named bucket %q\n",
				ep.Key, plural(int(ep.Requests), "response"), moved)
			continue
		}
		fmt.Fprintf(out, "  endpoint  %s: %s, %s; final limit %s, burst %d, mode %s\n",
			ep.Key, plural(int(ep.Requests), "response"), plural(int(ep.Throttled), "429"), formatLimit(ep.Limit), ep.Burst, ep.Mode)
	}
	if cfg.Client == clientPlain {
		fmt.Fprintln(out, "  (run without -client plain to see the same job through pacer)")
	}
}

// throttleStory explains the server's 429s.
func throttleStory(cfg config, r result) string {
	n := r.Server.Throttled
	switch {
	case cfg.Client == clientPlain:
		return fmt.Sprintf("%s: nothing paced the %d workers", plural(n, "429"), cfg.Concurrency)
	case n == 0 && learned(r):
		return "0 429s: pacer learned the limit from the first response and paced ahead of it"
	case n == 0:
		return "0 429s: the job never reached the limit"
	case r.ThrottledAfterFirst == 0:
		return fmt.Sprintf("%s, all before the first response came back; none after", plural(n, "429"))
	}
	why := ""
	switch cfg.Style {
	case apisim.StyleRetryAfter:
		why = " (this server names no quota: its 429s' Retry-After is all there is to learn from)"
	case apisim.StyleBare:
		why = " (this server sends bare 429s: pacer probes for the limit)"
	}
	if cfg.Unseen > 0 {
		why += " (the unseen client's share moves under pacer's feet)"
	}
	return fmt.Sprintf("%s, %d after the first response%s", plural(n, "429"), r.ThrottledAfterFirst, why)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "y") {
		word = strings.TrimSuffix(word, "y") + "ie"
	}
	word += "s"
	return fmt.Sprintf("%d %s", n, word)
}

// movedTo returns the bucket name of an endpoint "key#bucket" among eps, if
// any: pacer keys a server-named bucket by the scope it was learnt in.
func movedTo(key string, eps []pacer.Stats) string {
	for _, ep := range eps {
		if name, ok := strings.CutPrefix(ep.Key, key+"#"); ok {
			return name
		}
	}
	return ""
}

// learned reports whether some endpoint paces by what the headers said.
func learned(r result) bool {
	for _, ep := range r.Endpoints {
		if ep.Mode == "headers" {
			return true
		}
	}
	return false
}
