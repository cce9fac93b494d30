package header

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// decimal is the grammar ParseDecimal reads, around optional whitespace.
var decimal = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// parseDecimalReference is ParseDecimal by its definition: the reference
// the eight-at-a-time reading must agree with.
func parseDecimalReference(v string) (float64, bool) {
	v = strings.Trim(v, " \t")
	if !decimal.MatchString(v) {
		return 0, false
	}
	f, _ := strconv.ParseFloat(v, 64) // syntax checked; overflow gives +Inf
	return f, true
}

// ParseDecimal reads eight digits at a time where it can, and agrees with
// its definition: every length around a chunk's edge, and a non-digit
// (bytes just below '0' and above '9' among them) at every position of a
// chunk.
func TestParseDecimalReadsChunksAsDigits(t *testing.T) {
	for n := 1; n <= 20; n++ {
		digits := strings.Repeat("9876543210", 2)[:n]
		got, ok := ParseDecimal(digits)
		want, _ := strconv.ParseFloat(digits, 64)
		assert.True(t, ok, digits)
		assert.Equal(t, want, got, digits)
		for i := range n {
			for _, c := range []byte{'/', ':', ',', '.', ' ', 'a', 0x3f, 0xb5} {
				b := []byte(digits)
				b[i] = c
				v := string(b)
				got, ok := ParseDecimal(v)
				want, wantOK := parseDecimalReference(v)
				assert.Equal(t, wantOK, ok, "%q", v)
				assert.Equal(t, want, got, "%q", v)
			}
		}
	}
}

// seconds is Duration.Seconds, bit for bit, with or without whole seconds.
func TestSecondsIsDurationSeconds(t *testing.T) {
	for _, d := range []time.Duration{0, time.Second, -time.Second, 10 * time.Minute, 24 * time.Hour,
		1, -1, time.Second + 1, 1500 * time.Millisecond, -2500 * time.Millisecond, math.MaxInt64, math.MinInt64,
		math.MaxInt64 / time.Second * time.Second, math.MinInt64 / time.Second * time.Second} {
		assert.Equal(t, math.Float64bits(d.Seconds()), math.Float64bits(seconds(d)), "%d", d)
	}
}
