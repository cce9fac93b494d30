package header

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// parseDecimalByDigit is ParseDecimal as it was before it read eight digits
// at a time: the reference the chunked reading must agree with.
func parseDecimalByDigit(v string) (float64, bool) {
	v = trimOWS(v)
	if v == "" || !isDigit(v[0]) {
		return 0, false
	}
	var n uint64
	i := 0
	for ; i < len(v) && isDigit(v[i]); i++ {
		n = n*10 + uint64(v[i]-'0')
	}
	if i == len(v) && i <= 15 {
		return float64(n), true
	}
	if i < len(v) {
		if v[i] != '.' || i+1 == len(v) {
			return 0, false
		}
		for i++; i < len(v); i++ {
			if !isDigit(v[i]) {
				return 0, false
			}
		}
	}
	f, _ := strconv.ParseFloat(v, 64)
	return f, true
}

// ParseDecimal reads eight digits at a time where it can, and agrees with
// a digit-by-digit reading: every length around a chunk's edge, and a
// non-digit (bytes just below '0' and above '9' among them) at every
// position of a chunk.
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
				want, wantOK := parseDecimalByDigit(v)
				assert.Equal(t, wantOK, ok, "%q", v)
				assert.Equal(t, want, got, "%q", v)
			}
		}
	}
}
