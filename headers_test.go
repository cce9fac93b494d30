package pacer

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseHeadersReadsGitHub(t *testing.T) {
	info, ok := ParseHeaders(benchGitHub, benchNow)
	require.True(t, ok)
	require.Len(t, info.Quotas, 1)
	q := info.Quotas[0]
	assert.Equal(t, 5000.0, q.Limit)
	assert.Equal(t, 4997.0, q.Remaining)
	assert.True(t, q.Reset.Equal(time.Unix(1666132381, 0)), "reset %v", q.Reset)
	assert.Equal(t, "core", info.Bucket)
}

func TestParseHeadersReportsNothingWithoutRateLimitFields(t *testing.T) {
	info, ok := ParseHeaders(http.Header{"Content-Type": {"text/plain"}}, benchNow)
	assert.False(t, ok)
	assert.Zero(t, info)
}
