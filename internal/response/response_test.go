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
