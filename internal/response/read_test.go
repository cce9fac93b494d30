package response

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/header"
)

// caps is what the Transport believes by default: waits up to 15 minutes
// (pacer.DefaultMaxDelay), resets up to 31 days.
var caps = header.Caps{Wait: 15 * time.Minute, Reset: 31 * 24 * time.Hour}

// read is what resp means at now, read with caps and no clock to correct.
func read(resp *http.Response, now time.Time) *Meaning {
	if resp.Header == nil {
		resp.Header = http.Header{}
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	m := new(Meaning)
	Read(m, resp, now, caps, nil)
	return m
}

// Gemini states the wait of a 429 only in its body: the response reads as
// a Retry-After of that wait, capped like any, or of the headers' if that
// is longer (neither is waited out early); the body is given back byte for
// byte and nothing else is read.
func TestReadTakesTheWaitABodyStates(t *testing.T) {
	geminiBody := readGeminiBody(t)
	now := time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)
	for _, tc := range []struct {
		why     string
		status  int
		body    string
		header  http.Header
		maxWait time.Duration
		want    time.Duration
	}{
		{why: "Gemini's 429: 37 s", status: 429, body: geminiBody, want: 37 * time.Second},
		{why: "a 403 with a RetryInfo is read too", status: 403, body: geminiBody, want: 37 * time.Second},
		{why: "a shorter Retry-After header: the body's wait is the longer", status: 429, body: geminiBody,
			header: http.Header{"Retry-After": {"5"}}, want: 37 * time.Second},
		{why: "a longer Retry-After header: the headers' wait is the longer", status: 429, body: geminiBody,
			header: http.Header{"Retry-After": {"60"}}, want: 60 * time.Second},
		{why: "a wait beyond the cap is clamped to it", status: 429,
			body:    strings.Replace(geminiBody, `"37s"`, `"86400s"`, 1),
			maxWait: 10 * time.Minute, want: 10 * time.Minute},
		{why: "an absurd digit string is clamped to the cap", status: 429,
			body: strings.Replace(geminiBody, `"37s"`, `"`+strings.Repeat("9", 400)+`s"`, 1), want: caps.Wait},
		{why: "only 403 and 429 bodies are read", status: 503, body: geminiBody, want: 0},
		{why: "a RetryInfo past the peeked prefix is not read", status: 429,
			body: `{"pad":"` + strings.Repeat("x", PeekLimit) + `",` + geminiBody[1:], want: 0},
	} {
		resp := &http.Response{StatusCode: tc.status, Header: tc.header, Body: io.NopCloser(strings.NewReader(tc.body))}
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
		c := caps
		if tc.maxWait > 0 {
			c.Wait = tc.maxWait
		}
		var m Meaning
		Read(&m, resp, now, c, nil)
		assert.Equal(t, tc.want, m.RetryAfter, tc.why)
		if tc.want > 0 {
			assert.True(t, m.Throttled, "%s: throttled", tc.why)
		}
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, tc.body, string(got), "%s: the body, byte for byte", tc.why)
	}
}

// "Throttled" has one rule, read from the status, the headers and the
// body together.
func TestReadSaysWhetherTheServerThrottled(t *testing.T) {
	const (
		secondary = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`
		gone      = `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`
	)
	for _, tc := range []struct {
		why    string
		status int
		header http.Header
		body   string
		want   bool
		sig    Signal
	}{
		{why: "a 429 is a throttle", status: 429, want: true},
		{why: "a 503 is the server shedding load", status: 503, want: true},
		{why: "Anthropic's 529 overloaded_error", status: StatusOverloaded, want: true},
		{why: "a 200 is none, however little is left", status: 200, header: http.Header{"X-Ratelimit-Remaining": {"0"}}},
		{why: "GitHub's primary limit: a 403 with nothing left", status: 403, header: http.Header{"X-Ratelimit-Remaining": {"0"}}, want: true},
		{why: "a 403 with a Retry-After", status: 403, header: http.Header{"Retry-After": {"60"}}, want: true},
		{why: "a 403 with room left is a permission error", status: 403, header: http.Header{"X-Ratelimit-Remaining": {"12"}}},
		{why: "a 403 with a policy alone says nothing of what is left", status: 403, header: http.Header{"Ratelimit-Policy": {`"daily";q=1000;w=86400`}}},
		{why: "GitHub's secondary limit, stated in a 403's body", status: 403, header: http.Header{"X-Ratelimit-Remaining": {"4000"}},
			body: secondary, want: true, sig: BodyLimit},
		{why: "a quota gone for good is no throttle: no wait lifts it", status: 429, body: gone, sig: Gone},
		{why: "a 500 is an error, not a throttle", status: 500},
	} {
		m := read(&http.Response{StatusCode: tc.status, Header: tc.header, Body: io.NopCloser(strings.NewReader(tc.body))}, time.Now())
		assert.Equal(t, tc.want, m.Throttled, tc.why)
		assert.Equal(t, tc.sig, m.Body, tc.why)
		assert.Equal(t, tc.status, m.Status, tc.why)
	}
}

func TestA403IsThrottledWhenRemainingReadsAsZeroHoweverWritten(t *testing.T) {
	for _, tc := range []struct {
		remaining string
		want      bool
	}{
		{"0", true}, {" 0", true}, {"0.0", true}, {"0 ", true}, {"12", false},
		{"", false}, {"none", false}, {"-1", false}, {"NaN", false},
	} {
		m := read(&http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"X-Ratelimit-Remaining": {tc.remaining}}}, time.Now())
		assert.Equal(t, tc.want, m.Throttled, "Remaining %q", tc.remaining)
	}
}

// A 5xx is load shed unless the server asked for a wait or states a
// quota spent until a reset: a retry of shed load draws on a budget, a
// retry of a limit waits for it.
func TestOverloadedIsA5xxNoQuotaExplains(t *testing.T) {
	for _, tc := range []struct {
		why    string
		status int
		header http.Header
		want   bool
	}{
		{why: "a bare 503", status: 503, want: true},
		{why: "a 529 while the quota shows room", status: StatusOverloaded, header: http.Header{"X-Ratelimit-Remaining": {"40"}, "X-Ratelimit-Reset": {"30"}}, want: true},
		{why: "a 503 with a Retry-After is a limit", status: 503, header: http.Header{"Retry-After": {"3"}}},
		{why: "a 503 with a quota spent until its reset is a limit", status: 503, header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"30"}}},
		{why: "a quota spent with no reset explains nothing", status: 503, header: http.Header{"X-Ratelimit-Remaining": {"0"}}, want: true},
		{why: "a 429 is a limit", status: 429},
	} {
		m := read(&http.Response{StatusCode: tc.status, Header: tc.header}, time.Now())
		assert.Equal(t, tc.want, m.Overloaded(), tc.why)
	}
}

// A response read into a Meaning that held another leaves nothing of it.
func TestReadReplacesWhatTheMeaningHeld(t *testing.T) {
	now := time.Now()
	m := read(&http.Response{StatusCode: 429, Header: http.Header{
		"X-Ratelimit-Remaining": {"0, 0, 0"}, "X-Ratelimit-Bucket": {"core"}, "Retry-After": {"9"},
	}}, now)
	require.Equal(t, 3, m.Quotas.Len())
	Read(m, &http.Response{StatusCode: 200, Header: http.Header{"X-Ratelimit-Remaining": {"7"}}, Body: http.NoBody}, now, caps, nil)
	assert.Equal(t, 200, m.Status)
	assert.Equal(t, 1, m.Quotas.Len())
	assert.Equal(t, 7.0, m.Quotas.At(0).Remaining)
	assert.Zero(t, m.Info)
	assert.False(t, m.Throttled)
}

// The offset is the highest lower bound the Dates seen give (server −
// arrival), forgotten at skewDecay an hour, a Date off by more than
// maxSkew ignored.
func TestClockBoundsTheServersOffsetFromBelow(t *testing.T) {
	t0 := time.Date(2025, 8, 21, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return t0.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		why   string
		dates []string
		recv  []time.Duration // arrival of each, after t0
		at    time.Duration   // when the offset is read, after t0
		want  time.Duration
	}{
		{why: "no Date: no offset", at: 0, want: 0},
		{why: "a server 3 s ahead, read at the second's start", dates: []string{date(3 * time.Second)}, recv: []time.Duration{0}, want: 3 * time.Second},
		{why: "a later arrival of the same second bounds less tightly: the first stands",
			dates: []string{date(3 * time.Second), date(3 * time.Second)}, recv: []time.Duration{0, 400 * time.Millisecond}, want: 3 * time.Second},
		{why: "the highest bound wins", dates: []string{date(2 * time.Second), date(4 * time.Second)},
			recv: []time.Duration{time.Second, time.Second + 500*time.Millisecond}, at: time.Second + 500*time.Millisecond, want: 2500 * time.Millisecond},
		{why: "a server behind", dates: []string{date(-3 * time.Second)}, recv: []time.Duration{0}, want: -3 * time.Second},
		{why: "the bound decays a second an hour", dates: []string{date(3 * time.Second)}, recv: []time.Duration{0}, at: 2 * time.Hour, want: time.Second},
		{why: "a Date further off than a day is a broken header", dates: []string{date(25 * time.Hour)}, recv: []time.Duration{0}, want: 0},
		{why: "a Date that does not parse is ignored", dates: []string{"yesterday"}, recv: []time.Duration{0}, want: 0},
		{why: "X's Date, UTC for GMT", dates: []string{strings.Replace(date(3*time.Second), "GMT", "UTC", 1)}, recv: []time.Duration{0}, want: 3 * time.Second},
		{why: "another zone's name is not read as UTC", dates: []string{strings.Replace(date(3*time.Second), "GMT", "PST", 1)}, recv: []time.Duration{0}, want: 0},
	} {
		var c Clock
		for i, d := range tc.dates {
			c.Observe(d, t0.Add(tc.recv[i]))
		}
		assert.Equal(t, tc.want, c.Offset(t0.Add(tc.at)), tc.why)
	}
}

// A refusal of the limit (429) or of load (503) spends no quota; every
// other answer, a 403 or a 529 too, may have.
func TestCountedIsEveryAnswerButA429OrA503(t *testing.T) {
	for status, want := range map[int]bool{200: true, 201: true, 403: true, 404: true, 500: true, StatusOverloaded: true, 429: false, 503: false} {
		assert.Equal(t, want, read(&http.Response{StatusCode: status}, time.Now()).Counted(), "status %d", status)
	}
}

// A response that is no refusal costs the reading nothing beyond its
// headers: its body is neither read nor wrapped, nothing is allocated,
// and a JSON body is no stream to watch.
func TestReadingASuccessAllocatesNothing(t *testing.T) {
	h := http.Header{
		"Content-Type": {"application/json; charset=utf-8"}, "Date": {"Thu, 21 Aug 2025 12:40:00 GMT"},
		"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"4999"}, "X-Ratelimit-Reset": {"1755780000"}, "Retry-After": {"30"},
	}
	body := io.NopCloser(strings.NewReader(`{"message":"You have exceeded a secondary rate limit"}`))
	resp := &http.Response{StatusCode: 200, Header: h, Body: body, ContentLength: -1}
	now := time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)
	var m Meaning
	var clk Clock
	allocs := testing.AllocsPerRun(100, func() {
		Read(&m, resp, now, caps, &clk)
		if Stream(resp) {
			t.Fatal("a JSON body is no stream")
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, body, resp.Body, "the body untouched")
	assert.Equal(t, None, m.Body)
	assert.Zero(t, m.RetryAfter)
}
