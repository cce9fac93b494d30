package response

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stream is a 200 text/event-stream of body, served r at a time.
func stream(body string, r func(io.Reader) io.Reader) *http.Response {
	return &http.Response{StatusCode: 200, ContentLength: -1,
		Header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}},
		Body:   io.NopCloser(r(strings.NewReader(body)))}
}

// watch watches resp as the Transport does, reads its body whole as a
// caller would, and returns what was reported (nil: nothing) and what the
// caller read.
func watch(t *testing.T, resp *http.Response) (*Meaning, string) {
	t.Helper()
	require.True(t, Stream(resp))
	var got *Meaning
	reports := 0
	Watch(resp, caps, nil, nil, func(m *Meaning) { got, reports = m, reports+1 })
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.LessOrEqual(t, reports, 1, "one report at most")
	return got, string(b)
}

// Only a 2xx Server-Sent Events stream with a body is watched; looking costs
// a field's lookup.
func TestStreamIsA2xxEventStream(t *testing.T) {
	for _, tc := range []struct {
		why    string
		status int
		ct     []string
		length int64
		want   bool
	}{
		{"an event stream", 200, []string{"text/event-stream"}, -1, true},
		{"with a parameter, in another case", 200, []string{"Text/Event-Stream ; charset=utf-8"}, -1, true},
		{"a length stated", 200, []string{"text/event-stream"}, 120, true},
		{"JSON", 200, []string{"application/json"}, -1, false},
		{"no type: watched, read only if it opens as a stream", 200, nil, -1, true},
		{"a type that begins alike", 200, []string{"text/event-streams"}, -1, false},
		{"empty", 200, []string{"text/event-stream"}, 0, false},
		{"a refusal is read whole instead", 429, []string{"text/event-stream"}, -1, false},
		{"a redirect", 302, []string{"text/event-stream"}, -1, false},
	} {
		h := http.Header{}
		if tc.ct != nil {
			h["Content-Type"] = tc.ct
		}
		resp := &http.Response{StatusCode: tc.status, Header: h, ContentLength: tc.length, Body: io.NopCloser(strings.NewReader("data: {}\n\n"))}
		assert.Equal(t, tc.want, Stream(resp), tc.why)
	}
	assert.False(t, Stream(&http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, ContentLength: -1, Body: http.NoBody}), "no body")
}

// A 2xx that states no type is read as a stream only if its first line is
// an event stream's: a recorder that dropped Vertex AI's type still shows
// its refusal, and a body of anything else is passed over unread.
func TestABodyOfNoStatedTypeIsReadOnlyIfItOpensAsAStream(t *testing.T) {
	for _, tc := range []struct {
		why, body string
		refused   bool
	}{
		{"Vertex AI's refusal, its type dropped", `data: {"error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}}` + "\n\n", true},
		{"a comment first", ": keep-alive\n\ndata: {\"error\": {\"code\": 429, \"status\": \"RESOURCE_EXHAUSTED\"}}\n\n", true},
		{"JSON stating a refusal is not a stream", `{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}`, false},
		{"a line that begins as a field's name does", "database: {\"error\": {\"code\": 429}}\ndata: {\"error\": {\"code\": 429}}\n", false},
		{"an empty body", "", false},
	} {
		resp := &http.Response{StatusCode: 200, ContentLength: -1, Header: http.Header{},
			Body: io.NopCloser(iotest.OneByteReader(strings.NewReader(tc.body)))}
		got, read := watch(t, resp)
		assert.Equal(t, tc.body, read, "%s: the body byte for byte", tc.why)
		assert.Equal(t, tc.refused, got != nil && got.Throttled, tc.why)
	}
}

// A refusal a stream's first event states is reported as the caller reads
// it, with the status it stands for, read as a refusal's body is; the
// caller reads every byte as sent, however the reads cut it.
func TestWatchReportsARefusalInAStreamsFirstEvent(t *testing.T) {
	// Vertex AI's in-stream 429 (https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429):
	// a google.rpc.Status as the stream's data.
	const vertex = "data: {\"error\": {\"code\": 429, \"message\": \"Resource exhausted. Please try again later.\", \"status\": \"RESOURCE_EXHAUSTED\"}}\n\n"
	// Anthropic's (https://docs.anthropic.com/en/docs/build-with-claude/streaming#error-events).
	const anthropic = "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n"
	const chunk = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n"
	for _, tc := range []struct {
		why    string
		body   string
		status int // 0: no report
		wait   time.Duration
	}{
		{"Vertex AI's 429", vertex + chunk, 429, 0},
		{"Anthropic's overloaded_error", anthropic, StatusOverloaded, 0},
		{"OpenRouter's comments first", ": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n" + vertex, 429, 0},
		{"CRLF lines", strings.ReplaceAll(vertex, "\n", "\r\n"), 429, 0},
		{"a RetryInfo in the event", "data: {\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"7s\"}]}}\n\n",
			429, 7 * time.Second},
		{"OpenAI's rate_limit_exceeded", "data: {\"error\":{\"message\":\"Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}\n\n",
			429, 120 * time.Millisecond},
		{"the stream ends with the event's line unended", strings.TrimSuffix(vertex, "\n\n"), 429, 0},
		{"content first: the stream's own", chunk + vertex, 0, 0},
		{"another error is no refusal", "data: {\"error\": {\"code\": 400, \"message\": \"Bad request\", \"status\": \"INVALID_ARGUMENT\"}}\n\n", 0, 0},
		{"no data within the peek limit", strings.Repeat(": keep-alive\n", PeekLimit/12+1) + vertex, 0, 0},
		{"an empty stream", "", 0, 0},
	} {
		for name, r := range map[string]func(io.Reader) io.Reader{
			"whole": func(r io.Reader) io.Reader { return r }, "a byte at a time": iotest.OneByteReader, "halves": iotest.HalfReader,
		} {
			got, body := watch(t, stream(tc.body, r))
			assert.Equal(t, tc.body, body, "%s, %s: the stream, byte for byte", tc.why, name)
			if tc.status == 0 {
				assert.Nil(t, got, "%s, %s", tc.why, name)
				continue
			}
			require.NotNil(t, got, "%s, %s", tc.why, name)
			assert.Equal(t, tc.status, got.Status, "%s, %s", tc.why, name)
			assert.True(t, got.Throttled, "%s, %s", tc.why, name)
			assert.Equal(t, tc.wait, got.RetryAfter, "%s, %s", tc.why, name)
		}
	}
	// Load shed (Anthropic's 529 with no wait) is Overloaded, as a 529 is.
	got, _ := watch(t, stream(anthropic, func(r io.Reader) io.Reader { return r }))
	assert.True(t, got.Overloaded())
}

// The stream's read error reaches the caller, after what came before it;
// the watch reads what it had.
func TestWatchPassesAReadErrorOn(t *testing.T) {
	broken := errors.New("connection reset")
	resp := stream("", func(io.Reader) io.Reader {
		return io.MultiReader(strings.NewReader("data: {\"error\": {\"code\": 429, \"status\": \"RESOURCE"), iotest.ErrReader(broken))
	})
	var got *Meaning
	Watch(resp, caps, nil, nil, func(m *Meaning) { got = m })
	b, err := io.ReadAll(resp.Body)
	assert.ErrorIs(t, err, broken)
	assert.Equal(t, "data: {\"error\": {\"code\": 429, \"status\": \"RESOURCE", string(b))
	require.NotNil(t, got, "the code came before the cut")
	assert.Equal(t, 429, got.Status)
}

// Whatever a stream holds and however its reads cut it, the caller reads it
// byte for byte, the watch reports at most once, and what it reports is a
// throttle or a body signal with a bounded wait.
func FuzzWatch(f *testing.F) {
	for _, s := range []string{
		"data: {\"error\": {\"code\": 429, \"status\": \"RESOURCE_EXHAUSTED\"}}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n",
		": c\n\ndata: [{\"error\":{\"code\":\"429\",\"details\":[{\"@type\":\"google.rpc.RetryInfo\",\"retryDelay\":\"99999999999999999999s\"}]}}]\n",
		"data", "data:", "\r\r\r\n", "",
	} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		resp := stream(string(b), func(r io.Reader) io.Reader { return &cutReader{r: r, n: int(n%64) + 1} })
		reports := 0
		Watch(resp, caps, nil, nil, func(m *Meaning) {
			reports++
			if !m.Throttled && m.Body == None || m.RetryAfter < 0 || m.RetryAfter > caps.Wait {
				t.Fatalf("reported %+v", m)
			}
		})
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, b) || reports > 1 {
			t.Fatalf("read %q (%v), %d reports, of %q", got, err, reports, b)
		}
	})
}

// cutReader reads at most n bytes at a time.
type cutReader struct {
	r io.Reader
	n int
}

func (c *cutReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }
