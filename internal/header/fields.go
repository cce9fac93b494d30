package header

import (
	"strings"
)

// This file finds the rate-limit fields among the headers of a response.

// field is a rate-limit header field Parse reads.
type field uint8

const (
	fRetryAfter field = iota
	fRetryAfterMs
	fMsRetryAfterMs
	fRateLimit
	fRateLimitPolicy
	fRLLimit
	fRLRemaining
	fRLReset
	fXLimit
	fXRemaining
	fXReset
	fXResetAfter
	fXUsed
	fXResource
	fXBucket
	fXGlobal
	fXScope
	fXPolicy
	fOpenAI                  // limit, remaining, reset of requests, then of tokens
	fAnthropic = fOpenAI + 6 // limit, remaining, reset of each of anthropicQuotas
	fShopify   = fAnthropic + 12
	numFields  = fShopify + 1
)

// Parse keeps the fields found in a bit set.
var _ [64 - numFields]struct{}

// fieldSet holds the values of the fields present in one response.
type fieldSet struct {
	vals [numFields][]string
}

// prefer sets the fields of the bit set dup, found in h under several
// spellings, to the value of the preferred spelling (preferKey). Rare, so
// done in a second pass: keeping every field's key in the first cost
// clearing 600 bytes per response.
func (fs *fieldSet) prefer(h map[string][]string, dup uint64) {
	var keys [numFields]string
	for k, vs := range h {
		f, ok := classify(k)
		if !ok || len(vs) == 0 || dup&(1<<f) == 0 {
			continue
		}
		if keys[f] == "" || preferKey(k, keys[f]) {
			keys[f] = k
			fs.vals[f] = vs
		}
	}
}

// classify maps a header name, in any case, to the field it holds. The first
// three bytes reject nearly every other header before any copying.
func classify(k string) (field, bool) {
	// net/http hands over canonical keys: GitHub's, X's and OpenAI's fields
	// are then one 12-byte comparison and a switch, without the case folding
	// and copying below (in CPU profiles of a GitHub-style response that was
	// 40% of the header parse).
	if len(k) > len("X-Ratelimit-") && k[:len("X-Ratelimit-")] == "X-Ratelimit-" {
		if f, ok := classifyXCanonical(k[len("X-Ratelimit-"):]); ok {
			return f, true
		}
	}
	return classifyFold(k)
}

// classifyXCanonical is classifyX for the canonical spelling of the rest of
// an X-Ratelimit- name; false for anything else (which classifyFold then
// reads in any case).
func classifyXCanonical(rest string) (field, bool) {
	switch rest {
	case "Limit":
		return fXLimit, true
	case "Remaining":
		return fXRemaining, true
	case "Reset":
		return fXReset, true
	case "Reset-After":
		return fXResetAfter, true
	case "Used":
		return fXUsed, true
	case "Resource":
		return fXResource, true
	case "Bucket":
		return fXBucket, true
	case "Global":
		return fXGlobal, true
	case "Scope":
		return fXScope, true
	case "Policy":
		return fXPolicy, true
	case "Limit-Requests":
		return fOpenAI, true
	case "Remaining-Requests":
		return fOpenAI + 1, true
	case "Reset-Requests":
		return fOpenAI + 2, true
	case "Limit-Tokens":
		return fOpenAI + 3, true
	case "Remaining-Tokens":
		return fOpenAI + 4, true
	case "Reset-Tokens":
		return fOpenAI + 5, true
	}
	return 0, false
}

// classifyFold is classify for a name in any case.
func classifyFold(k string) (field, bool) {
	const maxLen = len("anthropic-ratelimit-output-tokens-remaining")
	if len(k) < len("ratelimit") || len(k) > maxLen {
		return 0, false
	}
	switch c0, c1, c2 := k[0]|0x20, k[1]|0x20, k[2]|0x20; {
	case c0 == 'x' && c1 == '-' && (c2 == 'r' || c2 == 's' || c2 == 'm'),
		c0 == 'r' && (c1 == 'a' || c1 == 'e' && c2 == 't'),
		c0 == 'a' && c1 == 'n':
	default:
		return 0, false
	}
	if rest, ok := cutPrefixFold(k, "x-ratelimit-"); ok {
		// The common case (GitHub, X, Reddit, Discord), without copying the
		// prefix: classifyX takes at most len("remaining-requests") bytes.
		var buf [len("remaining-requests")]byte
		if len(rest) > len(buf) {
			return 0, false
		}
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			buf[i] = c
		}
		return classifyX(buf[:len(rest)])
	}
	var buf [maxLen]byte
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	// Only names of at most 32 bytes are converted to strings: the compiler
	// keeps those on the stack, so classifying never allocates.
	b := buf[:len(k)]
	if rest, ok := cutPrefix(b, "x-ratelimit-"); ok {
		return classifyX(rest)
	}
	if rest, ok := cutPrefix(b, "x-rate-limit-"); ok {
		return classifyX(rest)
	}
	if rest, ok := cutPrefix(b, "anthropic-ratelimit-"); ok {
		for i, q := range [...]string{"requests-", "tokens-", "input-tokens-", "output-tokens-"} {
			if part, ok := cutPrefix(rest, q); ok {
				for j, name := range [...]string{"limit", "remaining", "reset"} {
					if string(part) == name {
						return fAnthropic + field(3*i+j), true
					}
				}
			}
		}
		return 0, false
	}
	if len(b) > len("x-shopify-shop-api-call-limit") {
		return 0, false
	}
	s := string(b)
	switch s {
	case "retry-after":
		return fRetryAfter, true
	case "retry-after-ms":
		return fRetryAfterMs, true
	case "x-ms-retry-after-ms":
		return fMsRetryAfterMs, true
	case "ratelimit":
		return fRateLimit, true
	case "ratelimit-policy":
		return fRateLimitPolicy, true
	case "ratelimit-limit":
		return fRLLimit, true
	case "ratelimit-remaining":
		return fRLRemaining, true
	case "ratelimit-reset":
		return fRLReset, true
	case "x-shopify-shop-api-call-limit":
		return fShopify, true
	}
	return 0, false
}

// cutPrefixFold is strings.CutPrefix with prefix, lower-case ASCII,
// matched in any case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) {
		return "", false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return "", false
		}
	}
	return s[len(prefix):], true
}

// classifyX maps the rest of an X-RateLimit- or X-Rate-Limit- name.
func classifyX(b []byte) (field, bool) {
	if len(b) > len("remaining-requests") {
		return 0, false
	}
	switch string(b) {
	case "limit":
		return fXLimit, true
	case "remaining":
		return fXRemaining, true
	case "reset":
		return fXReset, true
	case "reset-after":
		return fXResetAfter, true
	case "used":
		return fXUsed, true
	case "resource":
		return fXResource, true
	case "bucket":
		return fXBucket, true
	case "global":
		return fXGlobal, true
	case "scope":
		return fXScope, true
	case "policy":
		return fXPolicy, true
	case "limit-requests":
		return fOpenAI, true
	case "remaining-requests":
		return fOpenAI + 1, true
	case "reset-requests":
		return fOpenAI + 2, true
	case "limit-tokens":
		return fOpenAI + 3, true
	case "remaining-tokens":
		return fOpenAI + 4, true
	case "reset-tokens":
		return fOpenAI + 5, true
	}
	return 0, false
}

// cutPrefix is strings.CutPrefix for a byte slice and a constant.
func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix {
		return b[len(prefix):], true
	}
	return nil, false
}

// preferKey decides deterministically, whatever the map order, between two
// spellings of one field: the canonical one, else the smaller.
func preferKey(k, old string) bool {
	if c, cOld := isCanonicalKey(k), isCanonicalKey(old); c != cOld {
		return c
	}
	return k < old
}

func isCanonicalKey(k string) bool {
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (upper && isLower(c)) || (!upper && 'A' <= c && c <= 'Z') {
			return false
		}
		upper = c == '-'
	}
	return true
}

// first returns the first line of f, as http.Header.Get does.
func (fs *fieldSet) first(f field) string {
	if vs := fs.vals[f]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// joined returns all lines of structured field f combined as RFC 9651 says.
func (fs *fieldSet) joined(f field) (string, bool) {
	switch vs := fs.vals[f]; len(vs) {
	case 0:
		return "", false
	case 1:
		return vs[0], true
	default:
		return strings.Join(vs, ", "), true
	}
}
