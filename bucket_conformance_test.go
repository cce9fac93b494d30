package pacer

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pacer-go/pacer/internal/ratespec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The conformance suite of internal/ratespec, run against Bucket: every
// scenario reports x/time/rate's figures, or pacer's where the suite names a
// difference that the Bucket's doc comment states. The bench module runs the
// same suite against x/time/rate itself (bench/conformance_test.go).

type specBucket struct{ b *Bucket }

func (s specBucket) AllowN(t time.Time, n int) bool { return s.b.AllowNAt(t, n) }
func (s specBucket) ReserveN(t time.Time, n int) ratespec.Reservation {
	return s.b.ReserveNAt(t, n)
}
func (s specBucket) TokensAt(t time.Time) float64          { return s.b.TokensAt(t) }
func (s specBucket) SetLimitAt(t time.Time, limit float64) { s.b.SetLimitAt(t, Limit(limit)) }
func (s specBucket) SetBurstAt(t time.Time, burst int)     { s.b.SetBurstAt(t, burst) }

func TestBucketConformsToXTimeRateOrNamesTheDifference(t *testing.T) {
	src, err := os.ReadFile("bucket.go")
	require.NoError(t, err)
	doc := bucketDoc(string(src))
	for _, c := range ratespec.Cases {
		t.Run(c.Name, func(t *testing.T) {
			got := ratespec.Run(specBucket{NewBucket(Limit(c.Limit), c.Burst)}, c)
			assert.Equal(t, c.Expected(true), got)
			if len(c.Pacer) > 0 {
				require.NotEmpty(t, c.Doc, "a difference must be named")
				assert.Contains(t, doc, c.Doc, "the Bucket doc states the difference")
			}
		})
	}
}

// bucketDoc is the Bucket type's doc comment in src, its lines joined with
// spaces so that a phrase may cross a line break.
func bucketDoc(src string) string {
	end := strings.Index(src, "\ntype Bucket struct")
	if end < 0 {
		return ""
	}
	lines := strings.Split(src[:end], "\n")
	var doc []string
	for i := len(lines) - 1; i >= 0 && strings.HasPrefix(lines[i], "//"); i-- {
		doc = append([]string{strings.TrimSpace(strings.TrimPrefix(lines[i], "//"))}, doc...)
	}
	return strings.Join(strings.Fields(strings.Join(doc, " ")), " ")
}
