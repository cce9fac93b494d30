package recorded

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A session written for this test in the corpus's three shapes of a
// reading (a quota with the reading's fields beside it, a list of quotas,
// and the fields with a "quotas" list); not recorded from anyone.
const sample = `[{
  "provider": "example", "source": "written for this test", "source_kind": "synthetic", "notes": "", "docs": [],
  "responses": [
    {"status": 200, "method": "GET", "url": "https://api.example.test/v1/a",
     "headers": {"Date": ["Mon, 15 Nov 2021 23:40:31 UTC"], "X-RateLimit-Limit": ["10"], "X-RateLimit-Remaining": ["9"]}},
    {"status": null, "method": "POST", "url": "https://api.example.test/v1/b (not stated)",
     "headers": {"Date": ["Mon, 15 Nov 2021 23:40:33 GMT"]}},
    {"status": 429, "method": "GET", "url": "see the issue", "headers": {}, "body": "slow down"}
  ],
  "expected": {"summary": "three shapes", "per_response": [
    {"quota": "q", "unit": "requests", "limit": 10, "remaining": 9, "reset_at": "2021-11-15T23:41:00Z", "reset_after_s": 29, "window_s": 60, "throttled": false},
    [{"quota": "a", "unit": "tokens", "limit": 100, "remaining": null, "throttled": false}, {"quota": "b", "limit": null, "remaining": null}],
    {"quotas": [], "retry_after_s": 1.5, "retry_source": "body", "throttled": true}
  ]}
}]`

func TestLoadReadsEachShapeOfAReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corpus.json")
	require.NoError(t, os.WriteFile(path, []byte(sample), 0o600))
	ss, err := Load(path, "")
	require.NoError(t, err)
	require.Len(t, ss, 1)
	s := ss[0]
	assert.Equal(t, "00-example", s.Name())
	require.Len(t, s.Responses, 3)

	r0 := s.Responses[0]
	assert.Equal(t, time.Date(2021, 11, 15, 23, 40, 31, 0, time.UTC), r0.Date, "X's Date says UTC, not GMT")
	require.Len(t, r0.Want.Quotas, 1)
	f := r0.Want.Quotas[0]
	assert.Equal(t, Figure{Name: "q", Unit: "requests", Limit: 10, Remaining: 9, Used: -1,
		ResetAt: time.Date(2021, 11, 15, 23, 41, 0, 0, time.UTC), ResetAfter: 29, HasReset: true, Window: 60}, f)
	assert.Equal(t, -1.0, r0.Want.RetryAfter, "no wait asked for")

	r1 := s.Responses[1]
	assert.Equal(t, http.StatusOK, r1.Status, "a status not recorded is a 200")
	assert.False(t, r1.StatusKnown, "and not known to be one")
	assert.True(t, r0.StatusKnown)
	assert.Equal(t, "https://api.example.test/v1/b", r1.URL, "the recording's words after the URL are dropped")
	require.Len(t, r1.Want.Quotas, 1, "a quota with no count documents nothing to compare")
	assert.Equal(t, -1.0, r1.Want.Quotas[0].Remaining)

	r2 := s.Responses[2]
	assert.Equal(t, "https://unstated.invalid/", r2.URL)
	assert.True(t, r2.Want.Throttled)
	assert.True(t, r2.Want.InBody)
	assert.Equal(t, 1.5, r2.Want.RetryAfter)
	assert.Empty(t, r2.Want.Quotas)
}

func TestScheduleFollowsTheRecordedDates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corpus.json")
	require.NoError(t, os.WriteFile(path, []byte(sample), 0o600))
	ss, err := Load(path, "")
	require.NoError(t, err)
	s := ss[0]
	lat := 50 * time.Millisecond
	assert.Equal(t, time.Date(2021, 11, 15, 23, 40, 31, 0, time.UTC).Add(-lat), s.Start(lat))
	assert.Equal(t, []time.Duration{0, 2 * time.Second, 2*time.Second + undatedGap}, s.Schedule(lat),
		"by the Dates, then an undated response a gap after the one before")
}

func TestFindSaysWhenTheCorpusIsAbsent(t *testing.T) {
	t.Setenv("PACER_REPLAY_CORPUS", filepath.Join(t.TempDir(), "absent.json"))
	_, ok := Find()
	assert.False(t, ok)
}
