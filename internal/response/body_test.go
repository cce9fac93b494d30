package response

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // America/Los_Angeles for the Pacific midnight's check, wherever the tests run

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/header"
)

// The bodies below are written from the providers' documentation of their
// errors (each test names its source), with figures of our own.

// readRefusal is what a response of status with header h and body means at
// now; the body is checked to come back byte for byte.
func readRefusal(t *testing.T, status int, h http.Header, body string, now time.Time) *Meaning {
	t.Helper()
	if h == nil {
		h = http.Header{}
	}
	resp := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
	m := new(Meaning)
	Read(m, resp, now, caps, nil)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, body, string(got), "the body, byte for byte")
	return m
}

// quotas lists m's quotas.
func quotas(m *Meaning) []header.Quota {
	var out []header.Quota
	for i := range m.Quotas.Len() {
		out = append(out, *m.Quotas.At(i))
	}
	return out
}

// A Retry-After on a 1xx or 2xx asks for nothing: RFC 9110 section 10.2.3
// gives it a meaning on a 503 and a 3xx, RFC 6585 on a 429. Hugging Face's
// router and Anthropic send one on successes.
func TestARetryAfterOnASuccessIsNoWait(t *testing.T) {
	now := time.Date(2025, 11, 15, 20, 26, 32, 0, time.UTC)
	for _, tc := range []struct {
		status int
		field  string
		want   time.Duration
	}{
		{200, "Retry-After", 0}, {201, "Retry-After", 0}, {204, "Retry-After-Ms", 0}, {200, "X-Ms-Retry-After-Ms", 0},
		{100, "Retry-After", 0},
		{429, "Retry-After", 30 * time.Second}, {503, "Retry-After", 30 * time.Second},
		{301, "Retry-After", 30 * time.Second}, {429, "Retry-After-Ms", 30 * time.Millisecond},
	} {
		m := read(&http.Response{StatusCode: tc.status, Header: http.Header{tc.field: {"30"}}}, now)
		assert.Equal(t, tc.want, m.RetryAfter, "%d with %s: 30", tc.status, tc.field)
	}
	// The quotas a success states are read as ever.
	m := read(&http.Response{StatusCode: 200, Header: http.Header{
		"Retry-After": {"31"}, "Anthropic-Ratelimit-Requests-Limit": {"4000"}, "Anthropic-Ratelimit-Requests-Remaining": {"3999"},
	}}, now)
	require.Equal(t, 1, m.Quotas.Len())
	assert.Equal(t, 3999.0, m.Quotas.At(0).Remaining)
	assert.Zero(t, m.RetryAfter)
	assert.False(t, m.Throttled)
}

// google.rpc.RetryInfo's retryDelay, a google.protobuf.Duration in its JSON
// form (https://protobuf.dev/programming-guides/json/: seconds, up to nine
// decimals, and "s"), is the wait of Google's 429s.
func TestGooglesRetryInfoIsTheWait(t *testing.T) {
	const compact = `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"%s"}]}}`
	delay := func(d string) string { return strings.Replace(compact, "%s", d, 1) }
	for _, tc := range []struct {
		why  string
		body string
		want time.Duration
	}{
		{"Gemini's 429, compact", delay("37s"), 37 * time.Second},
		{"Gemini's 429 as sent, with a QuotaFailure and a Help link first", readGeminiBody(t), 37 * time.Second},
		{"fractional seconds", delay("1.5s"), 1500 * time.Millisecond},
		{"nanosecond precision, the most a Duration carries", delay("2.463586755s"), 2463586755 * time.Nanosecond},
		{"zero: retry at once", delay("0s"), 0},
		{"whitespace around the colon", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay" :
			"5s"}]}}`, 5 * time.Second},
		{"the type after the delay", `{"error":{"details":[{"retryDelay":"5s","@type":"type.googleapis.com/google.rpc.RetryInfo"}]}}`, 5 * time.Second},
		{"a stream's error, an array of one", `[{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"5s"}]}}]`, 5 * time.Second},
		// Malformed variants: none.
		{"a negative Duration", delay("-3s"), 0},
		{"no unit", delay("37"), 0},
		{"another unit", delay("37ms"), 0},
		{"an exponent", delay("1e3s"), 0},
		{"a number, not a Duration string", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":37}]}}`, 0},
		{"an unterminated string (a prefix cut short)", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37`, 0},
		{"a key cut short", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay`, 0},
		{"no RetryInfo detail: another API's retryDelay means something else", `{"error":{"retryDelay":"37s"}}`, 0},
		{"the key quoted inside a string is no key",
			`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","message":"say \"retryDelay\": \"900s\""}]}}`, 0},
		{"an escaped key matches no name", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retry\u0044elay":"9s"}]}}`, 0},
		{"no body", ``, 0},
	} {
		m := readRefusal(t, 429, nil, tc.body, time.Now())
		assert.Equal(t, tc.want, m.RetryAfter, tc.why)
		assert.True(t, m.Throttled, tc.why)
	}
}

// google.rpc.QuotaFailure lists the quotas a request violated
// (google/rpc/error_details.proto: quota_metric, quota_id, quota_value, an
// int64 that proto3's JSON writes as a string): each is a quota spent, of
// the window and unit its id names. Gemini's per-day quotas reset at
// midnight Pacific time (https://ai.google.dev/gemini-api/docs/rate-limits).
func TestGooglesViolationsAreSpentQuotas(t *testing.T) {
	violation := func(metric, id, value string) string {
		v := `{"quotaMetric":"generativelanguage.googleapis.com/` + metric + `","quotaId":"` + id +
			`","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"}`
		if value != "" {
			v += `,"quotaValue":` + value
		}
		return v + `}`
	}
	body := func(vs ...string) string {
		return `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[` +
			strings.Join(vs, ",") + `]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"21s"}]}}`
	}
	// 10:00 PDT on 1 July 2025: the day ends in 14 hours.
	now := time.Date(2025, 7, 1, 17, 0, 0, 0, time.UTC)
	pdtMidnight := time.Date(2025, 7, 2, 7, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		why  string
		body string
		want []header.Quota
	}{
		{"Gemini's documented 429: requests per minute, 10", readGeminiBody(t), []header.Quota{
			{Name: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", Limit: 10, Remaining: 0, Window: time.Minute}}},
		{"input tokens per minute: tokens", body(violation("generate_content_free_tier_input_token_count", "GenerateContentInputTokensPerModelPerMinute-FreeTier", `"250000"`)),
			[]header.Quota{{Name: "GenerateContentInputTokensPerModelPerMinute-FreeTier", Limit: 250000, Remaining: 0, Window: time.Minute, Unit: header.Tokens}}},
		{"a daily quota is spent until midnight Pacific; no value: limit unknown", body(violation("generate_content_free_tier_requests", "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "")),
			[]header.Quota{{Name: "GenerateRequestsPerDayPerProjectPerModel-FreeTier", Remaining: 0, Window: 24 * time.Hour, Reset: pdtMidnight}}},
		{"several violations, a quota each", body(
			violation("generate_content_free_tier_requests", "GenerateRequestsPerDayPerProjectPerModel-FreeTier", `"250"`),
			violation("generate_content_free_tier_requests", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", `"10"`)),
			[]header.Quota{
				{Name: "GenerateRequestsPerDayPerProjectPerModel-FreeTier", Limit: 250, Remaining: 0, Window: 24 * time.Hour, Reset: pdtMidnight},
				{Name: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", Limit: 10, Remaining: 0, Window: time.Minute}}},
		{"a quota value written as a number", body(violation("x_requests", "ReadRequestsPer100SecondsPerUser", "100")),
			[]header.Quota{{Name: "ReadRequestsPer100SecondsPerUser", Limit: 100, Remaining: 0, Window: 100 * time.Second}}},
		{"a violation named by its metric alone, no window", body(`{"quotaMetric":"pubsub.googleapis.com/read_requests"}`),
			[]header.Quota{{Name: "pubsub.googleapis.com/read_requests", Remaining: 0}}},
		{"a violation with nothing to name it by is none", body(`{"quotaValue":"5"}`), nil},
		{"a name with an escape is none", body(`{"quotaId":"Reads\"PerMinute"}`), nil},
		{"a value that is no count", body(violation("x_requests", "ReadsPerMinute", `"-5"`)),
			[]header.Quota{{Name: "ReadsPerMinute", Remaining: 0, Window: time.Minute}}},
	} {
		m := readRefusal(t, 429, nil, tc.body, now)
		assert.Equal(t, tc.want, quotas(m), tc.why)
		assert.True(t, m.Throttled, tc.why)
	}
	// A quota the headers state with the same limit and unit is that quota:
	// read once, as the headers state it.
	m := readRefusal(t, 429, http.Header{"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {"0"}}, readGeminiBody(t), now)
	require.Equal(t, 1, m.Quotas.Len())
	assert.Equal(t, "", m.Quotas.At(0).Name)
}

// google.rpc.ErrorInfo: a limit refused (reason RATE_LIMIT_EXCEEDED, with
// metadata.quota_limit: google/api/error_reason.proto's example), or a
// quota exhausted until the reset its metadata states, as the Gemini Code
// Assist backend sends it (quotaResetDelay, a Duration; quotaResetTimeStamp,
// RFC 3339).
func TestGooglesErrorInfoNamesTheQuotaAndItsReset(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	info := func(reason, metadata string) string {
		return `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` +
			reason + `","domain":"googleapis.com","metadata":{` + metadata + `}}]}}`
	}
	for _, tc := range []struct {
		why  string
		body string
		want []header.Quota
	}{
		{"Pub/Sub's reads per minute per project", info("RATE_LIMIT_EXCEEDED",
			`"consumer":"projects/123","service":"pubsub.googleapis.com","quota_metric":"pubsub.googleapis.com/read_requests","quota_limit":"ReadsPerMinutePerProject"`),
			[]header.Quota{{Name: "ReadsPerMinutePerProject", Remaining: 0, Window: time.Minute}}},
		{"with its value", info("RATE_LIMIT_EXCEEDED", `"quota_limit":"DefaultRequestsPerMinutePerProject","quota_limit_value":"60"`),
			[]header.Quota{{Name: "DefaultRequestsPerMinutePerProject", Limit: 60, Remaining: 0, Window: time.Minute}}},
		{"a model's quota, spent until a reset in nanoseconds", info("QUOTA_EXHAUSTED",
			`"uiMessage":"true","quotaResetDelay":"41.250000001s","quotaResetTimeStamp":"2026-03-02T09:30:41Z","model":"gemini-pro"`),
			[]header.Quota{{Name: "gemini-pro", Remaining: 0, Reset: now.Add(41250000001 * time.Nanosecond)}}},
		{"the time stamp alone", info("QUOTA_EXHAUSTED", `"quotaResetTimeStamp":"2026-03-02T09:30:41Z","model":"gemini-pro"`),
			[]header.Quota{{Name: "gemini-pro", Remaining: 0, Reset: now.Add(41 * time.Second)}}},
		{"a time stamp past is now", info("QUOTA_EXHAUSTED", `"quotaResetTimeStamp":"2026-03-02T09:29:00Z","model":"gemini-pro"`),
			[]header.Quota{{Name: "gemini-pro", Remaining: 0, Reset: now}}},
		{"a time stamp years past is none", info("QUOTA_EXHAUSTED", `"quotaResetTimeStamp":"2016-03-02T09:29:00Z","model":"gemini-pro"`),
			[]header.Quota{{Name: "gemini-pro", Remaining: 0}}},
		{"a time stamp beyond the reset cap is none", info("QUOTA_EXHAUSTED", `"quotaResetTimeStamp":"2036-03-02T09:29:00Z","model":"gemini-pro"`),
			[]header.Quota{{Name: "gemini-pro", Remaining: 0}}},
		{"a model named with nothing of its quota is none", info("QUOTA_EXHAUSTED", `"model":"gemini-pro"`), nil},
		{"another reason says nothing of a quota", info("API_KEY_INVALID", `"quota_limit":"ReadsPerMinutePerProject"`), nil},
	} {
		m := readRefusal(t, 429, nil, tc.body, now)
		assert.Equal(t, tc.want, quotas(m), tc.why)
	}
	// ErrorInfo and QuotaFailure naming one quota make one.
	both := `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","metadata":{"quota_limit":"ReadsPerMinutePerProject"}},` +
		`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"ReadsPerMinutePerProject","quotaValue":"600"}]}]}}`
	assert.Equal(t, []header.Quota{{Name: "ReadsPerMinutePerProject", Limit: 600, Remaining: 0, Window: time.Minute}}, quotas(readRefusal(t, 429, nil, both, now)))
}

// The next midnight on Pacific clocks, computed from the United States'
// rule, is the time zone database's at every hour from 2020 to 2031 (the
// changes of each year included).
func TestNextPacificMidnightIsTheTimeZoneDatabases(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	for at := time.Date(2020, 1, 1, 0, 30, 0, 0, time.UTC); at.Year() < 2031; at = at.Add(time.Hour) {
		l := at.In(la)
		want := time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, la)
		if got := nextPacificMidnight(at); !got.Equal(want) {
			t.Fatalf("nextPacificMidnight(%v) = %v, want %v", at, got.UTC(), want.UTC())
		}
	}
}

// OpenAI's rate-limit message, which Groq's OpenAI-compatible API sends as
// its 429's error message: the limit it names by abbreviation
// (https://console.groq.com/docs/rate-limits, https://platform.openai.com/docs/guides/rate-limits),
// its figures and the wait, a Go duration.
func TestOpenAIStyleMessagesStateAQuotaAndAWait(t *testing.T) {
	msg := func(text string) string {
		return `{"error":{"message":"` + text + `","type":"tokens","code":"rate_limit_exceeded"}}`
	}
	const groq = "Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_01` service tier `on_demand` on "
	const visit = " Visit https://console.groq.com/docs/rate-limits for more information."
	for _, tc := range []struct {
		why   string
		body  string
		quota []header.Quota
		wait  time.Duration
		sig   Signal
	}{
		{"tokens per minute", msg(groq + "tokens per minute (TPM): Limit 6000, Used 5200, Requested 1200. Please try again in 4.5s." + visit),
			[]header.Quota{{Name: "tokens-per-minute", Limit: 6000, Remaining: 800, Window: time.Minute, Unit: header.Tokens}}, 4500 * time.Millisecond, None},
		{"requests per day, minutes and seconds", msg(groq + "requests per day (RPD): Limit 1000, Used 1000, Requested 1. Please try again in 1m26.4s." + visit),
			[]header.Quota{{Name: "requests-per-day", Limit: 1000, Remaining: 0, Window: 24 * time.Hour}}, 86400 * time.Millisecond, None},
		{"audio seconds per hour count as tokens", msg(groq + "audio seconds per hour (ASH): Limit 7200, Used 7100, Requested 300. Please try again in 2m30s." + visit),
			[]header.Quota{{Name: "audio-seconds-per-hour", Limit: 7200, Remaining: 100, Window: time.Hour, Unit: header.Tokens}}, 150 * time.Second, None},
		{"milliseconds", msg(groq + "requests per minute (RPM): Limit 30, Used 30, Requested 1. Please try again in 2ms." + visit),
			[]header.Quota{{Name: "requests-per-minute", Limit: 30, Remaining: 0, Window: time.Minute}}, 2 * time.Millisecond, None},
		{"nine decimals", msg(groq + "tokens per minute (TPM): Limit 6000, Used 5999, Requested 2. Please try again in 10.123456789s." + visit),
			[]header.Quota{{Name: "tokens-per-minute", Limit: 6000, Remaining: 1, Window: time.Minute, Unit: header.Tokens}}, 10123456789 * time.Nanosecond, None},
		{"a request larger than the limit never fits: no wait", msg(groq + "tokens per minute (TPM): Limit 6000, Used 0, Requested ~9000. Please try again in 30s." + visit),
			[]header.Quota{{Name: "tokens-per-minute", Limit: 6000, Remaining: 6000, Window: time.Minute, Unit: header.Tokens}}, 0, TooLarge},
		{"OpenAI's message: per min", msg("Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s. Visit https://platform.openai.com/account/rate-limits to learn more."),
			[]header.Quota{{Name: "tokens-per-minute", Limit: 30000, Remaining: 1000, Window: time.Minute, Unit: header.Tokens}}, 2 * time.Second, None},
		{"OpenAI's older message: a wait, no figures", msg("Rate limit reached for default-gpt-3.5-turbo in organization org-abc on requests per min. Limit: 3 / min. Please try again in 20s."),
			nil, 20 * time.Second, None},
		{"Used beyond the limit: nothing left", msg(groq + "tokens per day (TPD): Limit 500000, Used 500100, Requested 50. Please try again in 5m." + visit),
			[]header.Quota{{Name: "tokens-per-day", Limit: 500000, Remaining: 0, Window: 24 * time.Hour, Unit: header.Tokens}}, 5 * time.Minute, None},
		{"an unknown abbreviation: the wait alone", msg(groq + "bananas per minute (BPM): Limit 5, Used 5, Requested 1. Please try again in 3s."),
			nil, 3 * time.Second, None},
		{"a thousands separator is no count", msg(groq + "tokens per minute (TPM): Limit 6,000, Used 5,200, Requested 1,200. Please try again in 4.5s."),
			nil, 4500 * time.Millisecond, None},
		{"a wait in words is none", msg("Rate limit reached. Please try again in a few minutes."), nil, 0, None},
	} {
		m := readRefusal(t, 429, nil, tc.body, time.Now())
		assert.Equal(t, tc.quota, quotas(m), tc.why)
		assert.Equal(t, tc.wait, m.RetryAfter, tc.why)
		assert.Equal(t, tc.sig, m.Body, tc.why)
		assert.Equal(t, tc.sig != TooLarge, m.Throttled, "%s: a request too large is no throttle", tc.why)
	}
	// Too large: the headers' wait is none either.
	m := readRefusal(t, 429, http.Header{"Retry-After": {"30"}}, msg(groq+"tokens per minute (TPM): Limit 6000, Used 0, Requested 9000. Please try again in 30s."), time.Now())
	assert.Equal(t, TooLarge, m.Body)
	assert.Zero(t, m.RetryAfter)
	// A quota the headers state (Groq's x-ratelimit-*-tokens is TPM) is not read twice.
	m = readRefusal(t, 429, http.Header{"X-Ratelimit-Limit-Tokens": {"6000"}, "X-Ratelimit-Remaining-Tokens": {"800"}},
		msg(groq+"tokens per minute (TPM): Limit 6000, Used 5200, Requested 1200. Please try again in 4.5s."), time.Now())
	require.Equal(t, 1, m.Quotas.Len())
	assert.Equal(t, "tokens", m.Quotas.At(0).Name)
}

// Go durations as Groq and OpenAI write their waits, read up to what
// follows them.
func TestGoDuration(t *testing.T) {
	for in, want := range map[string]float64{
		"5.289s. Visit": 5.289, "1m2.5s": 62.5, "50.597142857s": 50.597142857, "2ms": 0.002, "1h0m0s": 3600,
		"16h23m10.56s": 58990.56, "1.5µs": 1.5e-6, "7ns, then": 7e-9, "3s": 3,
	} {
		got, ok := goDuration([]byte(in))
		assert.True(t, ok, in)
		assert.InDelta(t, want, got, 1e-12, in)
	}
	for _, in := range []string{"", "s", "5", "5 seconds", "a few minutes", "1.2.3s", "-5s", "5x"} {
		_, ok := goDuration([]byte(in))
		assert.False(t, ok, in)
	}
}

// OpenRouter's errors (https://openrouter.ai/docs/api-reference/errors:
// {"error":{"code","message","metadata"}}): its own limits forwarded as
// headers in error.metadata.headers, read by the header grammar; a daily cap
// named in the message (https://openrouter.ai/docs/api-reference/limits);
// an upstream provider's refusal it relays.
func TestOpenRouterErrors(t *testing.T) {
	now := time.Date(2026, 5, 4, 10, 15, 20, 0, time.UTC)
	reset := now.Truncate(time.Minute).Add(time.Minute)
	for _, tc := range []struct {
		why   string
		body  string
		quota []header.Quota
		wait  time.Duration
		sig   Signal
	}{
		{"forwarded headers, the reset in epoch milliseconds, named and windowed by the message",
			`{"error":{"code":429,"message":"Rate limit exceeded: limit_rpm/vendor/model-7b/0a1b. High demand for vendor/model-7b:free on OpenRouter - limited to 20 requests per minute. Please retry shortly.","metadata":{"headers":{"X-RateLimit-Limit":"20","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"` +
				strconv.FormatInt(reset.UnixMilli(), 10) + `"},"provider_name":null}}}`,
			[]header.Quota{{Name: "limit_rpm/vendor/model-7b/0a1b", Limit: 20, Remaining: 0, Reset: reset, Window: time.Minute}}, 0, None},
		{"the error without its wrapper",
			`{"message":"Rate limit exceeded: limit_rpm/vendor/model-7b/0a1b.","code":429,"metadata":{"headers":{"X-RateLimit-Limit":"20","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"` +
				strconv.FormatInt(reset.UnixMilli(), 10) + `"}}}`,
			[]header.Quota{{Name: "limit_rpm/vendor/model-7b/0a1b", Limit: 20, Remaining: 0, Reset: reset, Window: time.Minute}}, 0, None},
		{"the daily cap named: spent for the day, no reset stated",
			`{"error":{"message":"Rate limit exceeded: free-models-per-day. ","type":"rate_limit_error","code":"429"}}`,
			[]header.Quota{{Name: "free-models-per-day", Remaining: 0, Window: 24 * time.Hour}}, 0, None},
		{"a name that states no window: nothing to read",
			`{"error":{"message":"Rate limit exceeded: something-else.","code":429}}`, nil, 0, None},
		{"an upstream's refusal: no quota of ours, no wait",
			`{"error":{"code":429,"message":"Provider returned error","metadata":{"provider_name":"Example","raw":"vendor/model:free is temporarily rate-limited upstream. Please retry shortly."}}}`,
			nil, 0, Upstream},
		{"a provider named empty names none",
			`{"error":{"code":429,"message":"Provider returned error","metadata":{"provider_name":""}}}`, nil, 0, None},
		{"an upstream's refusal with its Retry-After forwarded",
			`{"error":{"code":429,"message":"Provider returned error","metadata":{"provider_name":"Example","headers":{"Retry-After":"17"}}}}`,
			nil, 17 * time.Second, Upstream},
		{"a forwarded Date is not the server's clock",
			`{"error":{"code":429,"message":"x","metadata":{"headers":{"Date":"Mon, 04 May 2026 12:00:00 GMT","X-RateLimit-Limit":"20","X-RateLimit-Remaining":"3"}}}}`,
			[]header.Quota{{Limit: 20, Remaining: 3}}, 0, None},
	} {
		var clk Clock
		resp := &http.Response{StatusCode: 429, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tc.body))}
		var m Meaning
		Read(&m, resp, now, caps, &clk)
		assert.Equal(t, tc.quota, quotas(&m), tc.why)
		assert.Equal(t, tc.wait, m.RetryAfter, tc.why)
		assert.Equal(t, tc.sig, m.Body, tc.why)
		assert.True(t, m.Throttled, tc.why)
		assert.Equal(t, tc.sig == Upstream && tc.wait == 0, m.Overloaded(), "%s: an upstream's refusal is load shed", tc.why)
		assert.Zero(t, clk.Offset(now), tc.why)
	}
	// Moderation's 403 names a provider too, but is no upstream refusal.
	m := readRefusal(t, 403, nil, `{"error":{"code":403,"message":"Your chosen model requires moderation and your input was flagged","metadata":{"reasons":["x"],"provider_name":"Example"}}}`, now)
	assert.Equal(t, None, m.Body)
	assert.False(t, m.Throttled)
}

// Discord's 429 states its wait in the body too (retry_after, float
// seconds, https://discord.com/developers/docs/topics/rate-limits): the
// wait is the larger of the headers' and the body's; "global": true is a
// limit over every route.
func TestDiscordsBodyWait(t *testing.T) {
	const body = `{"message": "You are being rate limited.", "retry_after": 64.57, "global": false}`
	for _, tc := range []struct {
		why    string
		header http.Header
		body   string
		want   time.Duration
		global bool
	}{
		{"the body's wait", nil, body, 64570 * time.Millisecond, false},
		{"a shorter Retry-After: the body's", http.Header{"Retry-After": {"64"}}, body, 64570 * time.Millisecond, false},
		{"a longer Retry-After: the headers'", http.Header{"Retry-After": {"65"}}, body, 65 * time.Second, false},
		{"a global limit", nil, `{"message": "You are being rate limited.", "retry_after": 0.3, "global": true}`, 300 * time.Millisecond, true},
		{"a wait that is no number", nil, `{"retry_after": "soon"}`, 0, false},
		{"a negative wait", nil, `{"retry_after": -1}`, 0, false},
	} {
		m := readRefusal(t, 429, tc.header, tc.body, time.Now())
		assert.Equal(t, tc.want, m.RetryAfter, tc.why)
		assert.Equal(t, tc.global, m.Global, tc.why)
	}
}

// Whatever a refusal's body holds, reading it never panics, gives the body
// back byte for byte and keeps what it reads bounded: at most 16 quotas,
// each named by at most 256 visible characters, with finite figures (a
// Remaining that is -1 or within [0, Limit]), a reset within the cap, and a
// wait within [0, the cap].
func FuzzReadBody(f *testing.F) {
	f.Add([]byte(readGeminiBody(f)), false)
	for _, s := range []string{
		`{"error":{"message":"Rate limit reached for model ` + "`m`" + ` in organization ` + "`o`" + ` on tokens per minute (TPM): Limit 6000, Used 5200, Requested ~9200. Please try again in 1m2.5s.","code":"rate_limit_exceeded"}}`,
		`{"message":"Rate limit exceeded: limit_rpm/a/b.","code":429,"metadata":{"headers":{"X-RateLimit-Limit":"8","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"1783519380000","Retry-After":"9"},"provider_name":null}}`,
		`{"error":{"message":"Rate limit exceeded: free-models-per-day. ","code":"429"}}`,
		`{"error":{"code":429,"message":"Provider returned error","metadata":{"provider_name":"X"}}}`,
		`{"message": "You are being rate limited.", "retry_after": 64.57, "global": true}`,
		`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"QUOTA_EXHAUSTED","metadata":{"quotaResetDelay":"1e9s","quotaResetTimeStamp":"9999-12-31T23:59:59Z","model":"m"}}]}}`,
		`[[[[[[[[{"error":`, `{"error":{"error":{"error":{}}}}`, `"\`, `{"a":"\"}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, forbidden bool) {
		status := http.StatusTooManyRequests
		if forbidden {
			status = http.StatusForbidden
		}
		now := time.Date(2026, 7, 8, 14, 2, 0, 0, time.UTC)
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}
		var clk Clock
		var m Meaning
		Read(&m, resp, now, caps, &clk)
		if got, _ := io.ReadAll(resp.Body); !bytes.Equal(got, body) {
			t.Fatalf("the body came back as %q", got)
		}
		if m.RetryAfter < 0 || m.RetryAfter > caps.Wait {
			t.Fatalf("wait %v", m.RetryAfter)
		}
		if m.Quotas.Len() > 16 {
			t.Fatalf("%d quotas", m.Quotas.Len())
		}
		for _, q := range quotas(&m) {
			finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
			if len(q.Name) > 256 || strings.ContainsFunc(q.Name, func(r rune) bool { return r <= ' ' || r > '~' }) ||
				!finite(q.Limit) || q.Limit < 0 || !finite(q.Remaining) || q.Remaining < -1 ||
				q.Remaining > -1 && q.Remaining < 0 || q.Limit > 0 && q.Remaining > q.Limit ||
				q.Window < 0 || !q.Reset.IsZero() && (q.Reset.Before(now) || q.Reset.After(now.Add(caps.Reset))) {
				t.Fatalf("quota %+v", q)
			}
		}
	})
}
