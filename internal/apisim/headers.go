package apisim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// response is a rendered answer, shared by ServeHTTP and Transport.
type response struct {
	status int
	header http.Header
	body   []byte
}

// render turns an admission decision into the style's status, headers and body.
func (s *Server) render(d decision) response {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	// As every HTTP server does, in its own clock (Config.Now), at the
	// header's one-second resolution.
	h.Set("Date", d.wall.UTC().Format(http.TimeFormat))
	r := response{status: http.StatusOK, header: h}
	switch {
	case d.shed:
		r.status = http.StatusServiceUnavailable
		r.body = []byte(`{"error":{"type":"overloaded","message":"server overloaded, try again"}}`)
	case d.secondary:
		r.status = http.StatusForbidden
		r.body = []byte(secondaryBody)
	case d.gone:
		r.status = http.StatusTooManyRequests
		r.body = []byte(insufficientQuotaBody)
	case d.ok:
		r.body = fmt.Appendf(nil, `{"ok":true,"bucket":%q}`, d.bucket.name)
	default:
		r.status = http.StatusTooManyRequests
		r.body = []byte(`{"error":{"type":"rate_limit_exceeded","message":"rate limit exceeded"}}`)
	}
	f := figures{
		d:         d,
		limit:     int64(d.limit),
		remaining: floorCount(d.remaining),
		resetIn:   d.reset - d.now,
		// Only the stated quota's refusals speak of it (Retry-After, a
		// style's own 429 body); the others are told nothing about quota.
		throttled: !d.ok && !d.shed && !d.secondary && !d.gone,
	}
	f.resetWall = d.wall.Add(f.resetIn)
	f.used = max(0, f.limit-f.remaining)
	s.styleHeaders(&r, f)
	if d.ok && s.cfg.RetryAfterOnSuccess > 0 {
		h.Set("Retry-After", strconv.FormatInt(ceilSeconds(s.cfg.RetryAfterOnSuccess), 10))
	}
	return r
}

// figures are what an answer's headers state of its bucket's request quota.
type figures struct {
	d                      decision
	limit, remaining, used int64
	resetIn                time.Duration // until the reset, from the request
	resetWall              time.Time     // the reset in the server's clock
	throttled              bool          // a refusal of the stated quota
}

// retryAfter sets Retry-After on a refusal of the stated quota: whole
// seconds until the request would fit, rounded up, never "0".
func (f figures) retryAfter(h http.Header) {
	if f.throttled {
		h.Set("Retry-After", strconv.FormatInt(max(1, ceilSeconds(f.d.retryAfter)), 10))
	}
}

// styleHeaders writes the style's rate-limit fields, and its own 429 body.
func (s *Server) styleHeaders(r *response, f figures) {
	h, d := r.header, f.d
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	switch s.cfg.Style {
	case StyleGitHub:
		resource := d.bucket.name
		if d.bucket == s.shared {
			resource = "core"
		}
		h.Set("X-RateLimit-Limit", itoa(f.limit))
		h.Set("X-RateLimit-Remaining", itoa(f.remaining))
		h.Set("X-RateLimit-Reset", itoa(ceilUnix(f.resetWall)))
		h.Set("X-RateLimit-Used", itoa(f.used))
		h.Set("X-RateLimit-Resource", resource)
		if f.throttled {
			// GitHub signals an exhausted primary quota by Remaining 0 and the
			// reset; Retry-After belongs to its secondary limits only.
			r.body = []byte(gitHubTooManyBody)
		}
	case StyleIETF:
		h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", d.bucket.name, f.remaining, ceilSeconds(f.resetIn)))
		h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", d.bucket.name, f.limit, max(1, ceilSeconds(s.cfg.Window))))
		f.retryAfter(h)
	case StyleIETF07:
		h.Set("RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", f.limit, f.remaining, ceilSeconds(f.resetIn)))
		h.Set("RateLimit-Policy", fmt.Sprintf("%d;w=%d", f.limit, max(1, ceilSeconds(s.cfg.Window))))
		f.retryAfter(h)
	case StyleOpenAI:
		openAIHeaders(h, f)
	case StyleAnthropic:
		anthropicHeaders(r, f)
	case StyleDiscord:
		discordHeaders(r, f)
	case StyleShopify:
		size := d.limit
		if tb, ok := d.bucket.req.(*tokenBucket); ok {
			size = tb.burst
		}
		h.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", max(0, int64(size)-f.remaining), int64(size)))
		if f.throttled {
			h.Set("Retry-After", strconv.FormatFloat(float64(max(1, ceilSeconds(d.retryAfter))), 'f', 1, 64))
			r.body = []byte(shopifyTooManyBody)
		}
	case StyleX:
		h.Set("X-Rate-Limit-Limit", itoa(f.limit))
		h.Set("X-Rate-Limit-Remaining", itoa(f.remaining))
		h.Set("X-Rate-Limit-Reset", itoa(ceilUnix(f.resetWall)))
		if a := d.app; a.has {
			h.Set("X-App-Rate-Limit-Limit", itoa(int64(a.limit)))
			h.Set("X-App-Rate-Limit-Remaining", itoa(floorCount(a.remain)))
			h.Set("X-App-Rate-Limit-Reset", itoa(ceilUnix(d.wall.Add(a.reset-d.now))))
		}
		if f.throttled {
			r.body = []byte(xTooManyBody)
		}
	case StyleReddit:
		h.Set("X-Ratelimit-Used", itoa(f.used))
		h.Set("X-Ratelimit-Remaining", itoa(f.remaining)+".0")
		h.Set("X-Ratelimit-Reset", itoa(redditReset(f.resetIn)))
		if f.throttled {
			r.body = nil
		}
	case StyleMastodon:
		h.Set("X-RateLimit-Limit", itoa(f.limit))
		h.Set("X-RateLimit-Remaining", itoa(f.remaining))
		h.Set("X-RateLimit-Reset", mastodonReset(f.resetWall, d.wall))
		if f.throttled {
			r.body = []byte(`{"error":"Too many requests"}`)
		}
	case StyleGitLab:
		gitLabHeaders(r, f, s.cfg.Window)
	case StyleRetryAfter:
		f.retryAfter(h)
	case StyleBare:
	}
}

// openAIHeaders writes OpenAI's x-ratelimit-*-requests and, with a token
// quota, -tokens.
func openAIHeaders(h http.Header, f figures) {
	h.Set("X-Ratelimit-Limit-Requests", strconv.FormatInt(f.limit, 10))
	h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(f.remaining, 10))
	h.Set("X-Ratelimit-Reset-Requests", openAIDuration(f.resetIn))
	if tf := f.d.toks[totalTokens]; tf.has {
		h.Set("X-Ratelimit-Limit-Tokens", strconv.FormatInt(int64(tf.limit), 10))
		h.Set("X-Ratelimit-Remaining-Tokens", strconv.FormatInt(floorCount(tf.remain), 10))
		h.Set("X-Ratelimit-Reset-Tokens", openAIDuration(tf.reset-f.d.now))
	}
	f.retryAfter(h)
}

// anthropicHeaders writes anthropic-ratelimit-requests-* and one family per
// token quota.
func anthropicHeaders(r *response, f figures) {
	h, d := r.header, f.d
	h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.FormatInt(f.limit, 10))
	h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.FormatInt(f.remaining, 10))
	h.Set("Anthropic-Ratelimit-Requests-Reset", rfc3339Ceil(f.resetWall))
	for k, name := range [tokenKinds]string{totalTokens: "Tokens", inputTokens: "Input-Tokens", outputTokens: "Output-Tokens"} {
		tf := d.toks[k]
		if !tf.has {
			continue
		}
		// Anthropic documents token remaining as rounded to the nearest
		// thousand: it can exceed the truth by up to 500 tokens.
		rounded := int64(math.Round(float64(floorCount(tf.remain))/1000)) * 1000
		h.Set("Anthropic-Ratelimit-"+name+"-Limit", strconv.FormatInt(int64(tf.limit), 10))
		h.Set("Anthropic-Ratelimit-"+name+"-Remaining", strconv.FormatInt(rounded, 10))
		h.Set("Anthropic-Ratelimit-"+name+"-Reset", rfc3339Ceil(d.wall.Add(tf.reset-d.now)))
	}
	if f.throttled {
		r.body = []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"rate limit exceeded"}}`)
	}
	f.retryAfter(h)
}

// discordHeaders writes Discord's X-RateLimit-* with the bucket's id, and
// on a 429 the scope and the body's retry_after.
func discordHeaders(r *response, f figures) {
	h, d := r.header, f.d
	h.Set("X-RateLimit-Limit", strconv.FormatInt(f.limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(f.remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(ceilMillis(float64(f.resetWall.UnixNano())/1e9), 'f', 3, 64))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(ceilMillis(f.resetIn.Seconds()), 'f', 3, 64))
	h.Set("X-RateLimit-Bucket", d.bucket.id)
	if f.throttled {
		h.Set("X-RateLimit-Scope", "user")
		r.body = fmt.Appendf(nil, `{"message":"You are being rate limited.","retry_after":%s,"global":false}`,
			strconv.FormatFloat(ceilMillis(d.retryAfter.Seconds()), 'f', -1, 64))
	}
	f.retryAfter(h)
}

// gitLabHeaders writes gitlab.com's RateLimit-* as its recorded sessions
// show them (2018–2019, 600 a minute): the reset restated on every answer
// as the Date's second plus the window, and RateLimit-ResetTime naming the
// next day's weekday. GitLab documents the fields, and Retry-After on a
// 429 ("User and IP rate limits", response headers), whose body is Rack
// Attack's plain "Retry later".
func gitLabHeaders(r *response, f figures, window time.Duration) {
	h := r.header
	at := time.Unix(f.d.wall.Unix()+max(1, ceilSeconds(window)), 0).UTC()
	h.Set("RateLimit-Limit", strconv.FormatInt(f.limit, 10))
	h.Set("RateLimit-Observed", strconv.FormatInt(f.used, 10))
	h.Set("RateLimit-Remaining", strconv.FormatInt(f.remaining, 10))
	h.Set("RateLimit-Reset", strconv.FormatInt(at.Unix(), 10))
	h.Set("RateLimit-ResetTime", at.AddDate(0, 0, 1).Weekday().String()[:3]+at.Format(", 02 Jan 2006 15:04:05 GMT"))
	if f.throttled {
		h.Set("Content-Type", "text/plain")
		r.body = []byte("Retry later\n")
	}
	f.retryAfter(h)
}

// The bodies of the refusals no header explains, as the providers document
// them: GitHub's secondary rate limit (REST API docs, "About secondary rate
// limits") and OpenAI's insufficient_quota (API error codes).
const (
	gitHubTooManyBody  = `{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"}`
	shopifyTooManyBody = `{"errors":"Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}`
	// X API v2's 429 (the problem details it sends for every error).
	xTooManyBody          = `{"title":"Too Many Requests","detail":"Too Many Requests","type":"about:blank","status":429}`
	secondaryBody         = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits","status":"403"}`
	insufficientQuotaBody = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
)

// floorCount turns a remaining amount into the whole units a server reports.
func floorCount(v float64) int64 { return int64(math.Floor(v + epsilon)) }

// ceilUnix is t in epoch seconds, rounded up so a client never resumes early.
func ceilUnix(t time.Time) int64 {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return sec
}

func ceilMillis(seconds float64) float64 { return math.Ceil(seconds*1000-1e-6) / 1000 }

// rfc3339Ceil formats t like Anthropic (2025-08-21T12:40:59Z), rounded up to the second.
func rfc3339Ceil(t time.Time) string {
	return time.Unix(ceilUnix(t), 0).UTC().Format(time.RFC3339)
}

// redditReset is Reddit's x-ratelimit-reset for a reset resetIn away:
// whole seconds counted from half a second after the request, rounded up,
// so that Date + reset is the window's end or the second after it (never
// before), the request's place in its second deciding which; 0 once due.
func redditReset(resetIn time.Duration) int64 {
	if resetIn <= 0 {
		return 0
	}
	return ceilSeconds(resetIn + time.Second/2)
}

// mastodonReset is Mastodon's X-RateLimit-Reset: the reset rounded up to
// the second, plus the fraction of a second the request came in at, in ISO
// 8601 with microseconds ("2026-08-01T13:50:00.730654Z").
func mastodonReset(reset, request time.Time) string {
	frac := time.Duration(request.Nanosecond()) / time.Microsecond * time.Microsecond
	return time.Unix(ceilUnix(reset), int64(frac)).UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// openAIDuration formats the time until a quota is fully restored the way
// OpenAI does ("1s", "6m0s", "20ms", "2m59.56s"): Go duration syntax, rounded
// up to the millisecond below one second and to 10 ms above.
func openAIDuration(d time.Duration) string {
	unit := 10 * time.Millisecond
	if d < time.Second {
		unit = time.Millisecond
	}
	if d <= 0 {
		return "0s"
	}
	return ((d + unit - 1) / unit * unit).String()
}
