package header

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The values of rate-limit fields: numbers, durations and dates as servers
// write them.

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// ClampSeconds converts s seconds (possibly +Inf) to a Duration in
// [0, maxDelay]; NaN gives 0.
func ClampSeconds(s float64, maxDelay time.Duration) time.Duration {
	if !(s > 0) {
		return 0
	}
	if s >= seconds(maxDelay) {
		return maxDelay
	}
	// Checked again in nanoseconds, where rounding near the largest
	// Duration could otherwise wrap.
	if d := time.Duration(math.Round(s * 1e9)); d >= 0 && d < maxDelay {
		return d
	}
	return maxDelay
}

// seconds is d.Seconds(), without its division when d is whole seconds (a
// configured cap: DefaultMaxDelay, a MaxWait, MaxResetHorizon), where it
// adds float64(0)/1e9, +0, to the seconds: the same value. A numeric
// reset converts two such caps, and their divisions were 0.8% of a
// GitHub-style response's CPU time through the Transport.
func seconds(d time.Duration) float64 {
	if d%time.Second == 0 {
		return float64(d / time.Second)
	}
	return d.Seconds()
}

// ParseDecimal parses a plain decimal number, 1*DIGIT ["." 1*DIGIT], around
// optional whitespace. A digit string too long for a float64 is +Inf.
func ParseDecimal(v string) (float64, bool) {
	v = trimOWS(v)
	if v == "" || !isDigit(v[0]) {
		return 0, false
	}
	var n uint64
	i := 0
	// Eight digits at a time while there are eight: the counts and epoch
	// resets servers send are 9 to 13 digits (GitHub's limit, remaining
	// and reset), and digit by digit they were 5% of a GitHub-style
	// response's instructions through the Transport.
	for ; i+8 <= len(v); i += 8 {
		x, ok := eightDigits(v[i : i+8])
		if !ok {
			break
		}
		n = n*1e8 + x
	}
	for ; i < len(v) && isDigit(v[i]); i++ {
		n = n*10 + uint64(v[i]-'0')
	}
	if i == len(v) && i <= 15 {
		return float64(n), true // exact; the common case, with no strconv call
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
	f, _ := strconv.ParseFloat(v, 64) // syntax already checked; overflow gives +Inf
	return f, true
}

// eightDigits returns the number the 8 bytes of b spell if they are all
// decimal digits (SWAR: the bytes as one little-endian word, checked and
// combined in pairs, fours and eights, as simdjson parses eight digits).
func eightDigits(b string) (uint64, bool) {
	_ = b[7]
	x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	// Every byte 0x30..0x39: its high nibble is 3, and still 3 with 6
	// added (no carry crosses a byte whose high nibble is 3).
	const hi, threes, sixes = 0xF0F0F0F0F0F0F0F0, 0x3030303030303030, 0x0606060606060606
	if x&hi != threes || (x+sixes)&hi != threes {
		return 0, false
	}
	x = (x & 0x0F0F0F0F0F0F0F0F) * 2561 >> 8                     // pairs: 10*first + second
	x = (x & 0x00FF00FF00FF00FF) * 6553601 >> 16                 // fours
	return (x & 0x0000FFFF0000FFFF) * 42949672960001 >> 32, true // eight
}

// parseCount parses a finite, non-negative count.
func parseCount(v string) (float64, bool) {
	f, ok := ParseDecimal(v)
	if !ok || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// parseDuration parses a Go-style duration ("1s", "6m0s", "2m59.56s",
// "1h2m3s", "12ms") into seconds, without time.ParseDuration's allocation on
// failure. Signs are not accepted.
func parseDuration(v string) (float64, bool) {
	if v == "" {
		return 0, false
	}
	total := 0.0
	for v != "" {
		i, digits := 0, 0
		for ; i < len(v) && (isDigit(v[i]) || v[i] == '.'); i++ {
			if v[i] != '.' {
				digits++
			}
		}
		if digits == 0 || strings.Count(v[:i], ".") > 1 {
			return 0, false
		}
		n, _ := strconv.ParseFloat(v[:i], 64)
		j := i
		for j < len(v) && !isDigit(v[j]) && v[j] != '.' {
			j++
		}
		var unit float64
		switch v[i:j] {
		case "h":
			unit = 3600
		case "m":
			unit = 60
		case "s":
			unit = 1
		case "ms":
			unit = 1e-3
		case "us", "µs", "μs":
			unit = 1e-6
		case "ns":
			unit = 1e-9
		default:
			return 0, false
		}
		total += n * unit
		v = v[j:]
	}
	return total, true
}

// parseDate parses the absolute resets servers send: RFC 3339 (Anthropic),
// HTTP-date and JavaScript's Date.toString (seen from Lemlist).
func parseDate(v string) (time.Time, bool) {
	if len(v) >= 20 && isDigit(v[0]) && v[4] == '-' {
		t, err := time.Parse(time.RFC3339Nano, v)
		return t, err == nil
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	js, _, _ := strings.Cut(v, " (")
	t, err := time.Parse("Mon Jan 02 2006 15:04:05 GMT-0700", js)
	return t, err == nil
}

func trimOWS(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// validBucket accepts 1 to 256 visible ASCII characters: a bucket becomes a
// map key, so a hostile one must not be able to grow memory.
func validBucket(b string) bool {
	if b == "" || len(b) > maxNameLen {
		return false
	}
	for i := 0; i < len(b); i++ {
		if b[i] <= ' ' || b[i] > '~' {
			return false
		}
	}
	return true
}
