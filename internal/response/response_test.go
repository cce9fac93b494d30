package response

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readGeminiBody returns the body of a Gemini API 429 as Google documents its
// errors: a google.rpc.Status whose details carry a QuotaFailure, a Help
// link and a RetryInfo, pretty-printed as the API sends it. The root
// package's tests read it too.
func readGeminiBody(t testing.TB) string {
	b, err := os.ReadFile(filepath.Join("testdata", "gemini-429.json"))
	require.NoError(t, err)
	return string(b)
}

func TestClassifyBody(t *testing.T) {
	for _, tc := range []struct {
		body string
		want Signal
	}{
		{`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`, BodyLimit},
		{`{"message":"You have triggered an abuse detection mechanism."}`, BodyLimit},
		{`{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded"}]}`, BodyLimit},
		{`{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, Gone},
		{`{"error":{"type":"rate_limit_exceeded","message":"Rate limit reached for requests"}}`, None},
		{`{"message":"API rate limit exceeded for user ID 1."}`, None},
		{``, None},
	} {
		assert.Equal(t, tc.want, Classify([]byte(tc.body)), "%s", tc.body)
	}
}

// The classifier reads a bounded prefix of the body and gives the caller
// every byte back, however long the body.
func TestPeekGivesTheBodyBackByteForByte(t *testing.T) {
	long := `{"message":"You have exceeded a secondary rate limit."}` + strings.Repeat("x", 3*PeekLimit)
	for _, body := range []string{long, `{"message":"You have exceeded a secondary rate limit."}`, `short`} {
		resp := &http.Response{StatusCode: http.StatusForbidden, Body: io.NopCloser(strings.NewReader(body))}
		sig := Classify(Peek(resp))
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, body, string(got))
		assert.NoError(t, resp.Body.Close())
		if strings.Contains(body, "secondary") && len(body) < PeekLimit {
			assert.Equal(t, BodyLimit, sig)
		}
	}
	ok := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("secondary rate limit"))}
	assert.Nil(t, Peek(ok), "only 403 and 429 bodies are read")
}

func TestRetryDelay(t *testing.T) {
	geminiBody := readGeminiBody(t)
	const compact = `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"%s"}]}}`
	for _, tc := range []struct {
		why  string
		body string
		want float64 // seconds; -1: none
	}{
		{"Gemini's 429, compact", strings.Replace(compact, "%s", "37s", 1), 37},
		{"Gemini's 429 as sent, with a QuotaFailure and a Help link first", geminiBody, 37},
		{"a Duration with fractional seconds", strings.Replace(compact, "%s", "1.5s", 1), 1.5},
		{"nanosecond precision, the most a Duration carries", strings.Replace(compact, "%s", "3.000000001s", 1), 3.000000001},
		{"zero: retry at once", strings.Replace(compact, "%s", "0s", 1), 0},
		{"whitespace around the colon", `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay" :
			"5s"}`, 5},
		// Malformed variants: none.
		{"a negative Duration", strings.Replace(compact, "%s", "-3s", 1), -1},
		{"no unit", strings.Replace(compact, "%s", "37", 1), -1},
		{"another unit", strings.Replace(compact, "%s", "37ms", 1), -1},
		{"an exponent", strings.Replace(compact, "%s", "1e3s", 1), -1},
		{"a number, not a Duration string", `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":37}`, -1},
		{"an unterminated string (a prefix cut short)", `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37`, -1},
		{"a key cut short", `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay`, -1},
		{"no RetryInfo detail: another API's retryDelay means something else",
			`{"error":{"retryDelay":"37s"}}`, -1},
		{"the key quoted inside a string is no key",
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","message":"say \"retryDelay\": \"900s\""}`, -1},
		{"no body", ``, -1},
	} {
		s, ok := RetryDelay([]byte(tc.body))
		if tc.want < 0 {
			assert.False(t, ok, "%s: got %v", tc.why, s)
			continue
		}
		assert.True(t, ok, tc.why)
		assert.InDelta(t, tc.want, s, 1e-12, tc.why)
	}
}

// Whatever a body holds, the wait read from it is a non-negative number of
// seconds, and reading it never panics.
func FuzzRetryDelay(f *testing.F) {
	geminiBody := readGeminiBody(f)
	for _, s := range []string{geminiBody, `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}`,
		`google.rpc.RetryInfo "retryDelay":"`, `google.rpc.RetryInfo"retryDelay":"-1s"`, `"retryDelay"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, ok := RetryDelay(b); ok && !(s >= 0) {
			t.Fatalf("RetryDelay(%q) = %v", b, s)
		}
	})
}
