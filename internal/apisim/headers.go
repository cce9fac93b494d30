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
	// Only the stated quota's refusals speak of it (Retry-After, a
	// style's own 429 body); the others are told nothing about quota.
	throttled := !d.ok && !d.shed && !d.secondary && !d.gone
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

	limit := int64(d.limit)
	remaining := floorCount(d.remaining)
	resetIn := d.reset - d.now
	resetWall := d.wall.Add(resetIn)
	retry := max(1, ceilSeconds(d.retryAfter)) // 429 only: never tell a client "0"
	setRetryAfter := func() {
		if throttled {
			h.Set("Retry-After", strconv.FormatInt(retry, 10))
		}
	}

	switch s.cfg.Style {
	case StyleGitHub:
		resource := d.bucket.name
		if d.bucket == s.shared {
			resource = "core"
		}
		h.Set("X-RateLimit-Limit", strconv.FormatInt(limit, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(resetWall), 10))
		h.Set("X-RateLimit-Used", strconv.FormatInt(max(0, limit-remaining), 10))
		h.Set("X-RateLimit-Resource", resource)
		if throttled {
			// GitHub signals an exhausted primary quota by Remaining 0 and the
			// reset; Retry-After belongs to its secondary limits only.
			r.body = []byte(`{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"}`)
		}
	case StyleIETF:
		h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", d.bucket.name, remaining, ceilSeconds(resetIn)))
		h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", d.bucket.name, limit, max(1, ceilSeconds(s.cfg.Window))))
		setRetryAfter()
	case StyleIETF07:
		h.Set("RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", limit, remaining, ceilSeconds(resetIn)))
		h.Set("RateLimit-Policy", fmt.Sprintf("%d;w=%d", limit, max(1, ceilSeconds(s.cfg.Window))))
		setRetryAfter()
	case StyleOpenAI:
		h.Set("X-Ratelimit-Limit-Requests", strconv.FormatInt(limit, 10))
		h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(remaining, 10))
		h.Set("X-Ratelimit-Reset-Requests", openAIDuration(resetIn))
		if tf := d.toks[totalTokens]; tf.has {
			h.Set("X-Ratelimit-Limit-Tokens", strconv.FormatInt(int64(tf.limit), 10))
			h.Set("X-Ratelimit-Remaining-Tokens", strconv.FormatInt(floorCount(tf.remain), 10))
			h.Set("X-Ratelimit-Reset-Tokens", openAIDuration(tf.reset-d.now))
		}
		setRetryAfter()
	case StyleAnthropic:
		h.Set("Anthropic-Ratelimit-Requests-Limit", strconv.FormatInt(limit, 10))
		h.Set("Anthropic-Ratelimit-Requests-Remaining", strconv.FormatInt(remaining, 10))
		h.Set("Anthropic-Ratelimit-Requests-Reset", rfc3339Ceil(resetWall))
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
		if throttled {
			r.body = []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"rate limit exceeded"}}`)
		}
		setRetryAfter()
	case StyleDiscord:
		h.Set("X-RateLimit-Limit", strconv.FormatInt(limit, 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining, 10))
		h.Set("X-RateLimit-Reset", strconv.FormatFloat(ceilMillis(float64(resetWall.UnixNano())/1e9), 'f', 3, 64))
		h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(ceilMillis(resetIn.Seconds()), 'f', 3, 64))
		h.Set("X-RateLimit-Bucket", d.bucket.id)
		if throttled {
			h.Set("X-RateLimit-Scope", "user")
			r.body = fmt.Appendf(nil, `{"message":"You are being rate limited.","retry_after":%s,"global":false}`,
				strconv.FormatFloat(ceilMillis(d.retryAfter.Seconds()), 'f', -1, 64))
		}
		setRetryAfter()
	case StyleShopify:
		size := d.limit
		if tb, ok := d.bucket.req.(*tokenBucket); ok {
			size = tb.burst
		}
		used := max(0, int64(size)-remaining)
		h.Set("X-Shopify-Shop-Api-Call-Limit", fmt.Sprintf("%d/%d", used, int64(size)))
		if throttled {
			h.Set("Retry-After", strconv.FormatFloat(float64(retry), 'f', 1, 64))
			r.body = []byte(`{"errors":"Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}`)
		}
	case StyleX:
		h.Set("X-Rate-Limit-Limit", strconv.FormatInt(limit, 10))
		h.Set("X-Rate-Limit-Remaining", strconv.FormatInt(remaining, 10))
		h.Set("X-Rate-Limit-Reset", strconv.FormatInt(ceilUnix(resetWall), 10))
		if throttled {
			r.body = []byte(xTooManyBody)
		}
	case StyleRetryAfter:
		setRetryAfter()
	case StyleBare:
	}
	return r
}

// The bodies of the refusals no header explains, as the providers document
// them: GitHub's secondary rate limit (REST API docs, "About secondary rate
// limits") and OpenAI's insufficient_quota (API error codes).
const (
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
