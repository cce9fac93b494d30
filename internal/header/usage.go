package header

// A scanner of the JSON in Meta's usage headers (see meta): a few numbers,
// found by their keys, without decoding the document.

// usage is what one of Meta's usage headers states.
type usage struct {
	// percent is the largest percentage of the allowance used
	// (call_count, total_cputime, total_time); hasPercent tells that one
	// was stated.
	percent    float64
	hasPercent bool
	// regainMinutes is the largest estimated_time_to_regain_access, the
	// minutes until a throttled caller may call again; 0 if none.
	regainMinutes float64
}

// maxUsageLen bounds the JSON scanned, and with it the work: Meta's
// headers are tens of bytes an object, one object per business id.
const maxUsageLen = 4096

// scanUsage reads v, one of Meta's usage headers, in one pass over its
// JSON tokens: every number that is the value of a key call_count,
// total_cputime or total_time (a percentage) or
// estimated_time_to_regain_access (minutes), however deeply nested. A
// value that is not a plain decimal (negative, an exponent, a string) is
// skipped. ok is false, and nothing is read, when v is longer than
// maxUsageLen, holds a byte that starts no JSON token, or a string that is
// not closed.
func scanUsage(v string) (u usage, ok bool) {
	if len(v) > maxUsageLen {
		return usage{}, false
	}
	key := "" // the key whose value comes next; "" when the next token is none
	for i := 0; i < len(v); {
		switch c := v[i]; {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c == ':':
			i++
		case c == '{' || c == '}' || c == '[' || c == ']' || c == ',':
			key = ""
			i++
		case c == '"':
			end := quotedEnd(v, i)
			if end < 0 {
				return usage{}, false
			}
			s := v[i+1 : end-1]
			i = skipJSONSpace(v, end)
			key = ""
			if i < len(v) && v[i] == ':' {
				key = s
				i++
			}
		case c == '-' || isDigit(c) || isLower(c):
			j := i + 1
			for j < len(v) && (isDigit(v[j]) || isLower(v[j]) || v[j] == '.' || v[j] == '+' || v[j] == '-' || v[j] == 'E') {
				j++
			}
			if x, isNum := ParseDecimal(v[i:j]); isNum {
				u.add(key, x)
			}
			key, i = "", j
		default:
			return usage{}, false
		}
	}
	return u, true
}

// add folds in x, the value of key.
func (u *usage) add(key string, x float64) {
	switch key {
	case "call_count", "total_cputime", "total_time":
		u.percent, u.hasPercent = max(u.percent, x), true
	case "estimated_time_to_regain_access":
		u.regainMinutes = max(u.regainMinutes, x)
	}
}

// skipJSONSpace returns the index of the first byte of v from i on that is
// not JSON whitespace.
func skipJSONSpace(v string, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\r' || v[i] == '\n') {
		i++
	}
	return i
}
