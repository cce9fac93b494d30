package header

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every field name, as net/http canonicalises it and in other cases, is
// classified as the case-folding path classifies its lower-case form: the
// canonical fast path is a shortcut, never a different answer.
func TestClassifyCanonicalFastPathAgreesWithCaseFolding(t *testing.T) {
	names := []string{
		"retry-after", "retry-after-ms", "x-ms-retry-after-ms",
		"ratelimit", "ratelimit-policy", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset",
		"x-shopify-shop-api-call-limit",
		// Near misses: the fast path must not accept them either.
		"x-ratelimit-", "x-ratelimit-limits", "x-ratelimit-reset-afte", "x-ratelimit-limit-request",
		"x-ratelimit-remaining-requests-x", "x-ratelimit-x", "x-ratelimit-used ",
	}
	for _, rest := range []string{"limit", "remaining", "reset", "reset-after", "used", "resource", "bucket",
		"global", "scope", "policy", "limit-requests", "remaining-requests", "reset-requests", "limit-tokens",
		"remaining-tokens", "reset-tokens"} {
		names = append(names, "x-ratelimit-"+rest, "x-rate-limit-"+rest)
	}
	for _, q := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		for _, f := range []string{"limit", "remaining", "reset"} {
			names = append(names, "anthropic-ratelimit-"+q+"-"+f)
		}
	}
	known := 0
	for _, lower := range names {
		want, wantOK := classifyFold(lower)
		if wantOK {
			known++
		}
		for _, k := range []string{lower, http.CanonicalHeaderKey(lower), strings.ToUpper(lower)} {
			f, ok := classify(k)
			assert.Equal(t, wantOK, ok, k)
			assert.Equal(t, want, f, k)
		}
	}
	assert.Equal(t, 9+2*16+12, known, "every field name is known")
}
