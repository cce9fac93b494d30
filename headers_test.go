package pacer

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/internal/header"
	"github.com/pacer-go/pacer/internal/response"
)

// The header conventions themselves, case by case with the providers'
// documented examples, are tested in internal/header; these tests hold the
// public face to them: the caps ParseHeaders parses under, and every field
// of the grammar's reading carried over to Info and Quota.

// Reference times: each provider's documented example headers were captured
// at some moment; now is set a little before their reset.
var (
	ghNow   = time.Unix(1666132381, 0).Add(-33 * time.Minute).UTC() // X-RateLimit-Reset: 1666132381
	ietfNow = time.Date(2024, 10, 21, 9, 0, 0, 0, time.UTC)
)

// The Transport's cap bounds Retry-After; resets are reported as stated (up
// to MaxResetHorizon): how long to wait for one is the limiter's decision.
func TestParseHeadersClampsRetryAfterToTheTransportCap(t *testing.T) {
	now := ghNow
	h := http.Header{
		"Retry-After":           {"7200"},
		"X-Ratelimit-Limit":     {"5000"},
		"X-Ratelimit-Remaining": {"4997"},
		"X-Ratelimit-Reset":     {"1666132381"}, // 33 minutes ahead
	}
	info, ok := parseHeaders(h, now, 10*time.Minute)
	require.True(t, ok)
	assert.Equal(t, 10*time.Minute, info.RetryAfter)
	assert.Equal(t, now.Add(33*time.Minute), info.Quotas[0].Reset, "a reset is not a wait: not clamped")

	info, _ = parseHeaders(h, now, 0)
	assert.Equal(t, DefaultMaxDelay, info.RetryAfter, "a cap of 0 means DefaultMaxDelay")
	assert.Equal(t, now.Add(33*time.Minute), info.Quotas[0].Reset)
}

// Daily and monthly quotas' resets are believed; farther epochs are misread
// units or broken clocks, and a cap longer than MaxResetHorizon widens it.
func TestParseHeadersBelievesResetsUpToAMonthAway(t *testing.T) {
	now := ghNow
	h := http.Header{"X-Ratelimit-Remaining": {"1"}, "X-Ratelimit-Reset": {"1666254781"}} // 34 h ahead
	info, _ := parseHeaders(h, now, 0)
	require.Len(t, info.Quotas, 1)
	assert.Equal(t, now.Add(34*time.Hour+33*time.Minute), info.Quotas[0].Reset)

	far := http.Header{"X-Ratelimit-Remaining": {"1"}, "X-Ratelimit-Reset": {"1669592701"}} // 40 days ahead
	info, _ = parseHeaders(far, now, 0)
	assert.True(t, info.Quotas[0].Reset.IsZero(), "beyond MaxResetHorizon: ignored")
	info, _ = parseHeaders(far, now, 60*24*time.Hour)
	assert.False(t, info.Quotas[0].Reset.IsZero(), "a cap longer than MaxResetHorizon widens it")
}

func TestParseHeadersDoesNotModifyTheHeader(t *testing.T) {
	h := benchGitHub.Clone()
	h["ratelimit-policy"] = []string{`"a";q=1`, `"b";q=2`}
	before := h.Clone()
	ParseHeaders(h, ghNow)
	assert.Equal(t, before, h)
}

// A quota counts tokens by the server's convention, not by its name: an
// IETF policy named "tokens" counts requests (the field states no unit).
func TestParseHeadersUnitIsTheConventionsNotTheName(t *testing.T) {
	h := http.Header{"Ratelimit-Policy": {`"tokens";q=100;w=60`}, "Ratelimit": {`"tokens";r=50;t=30`},
		"X-Ratelimit-Limit-Tokens": {"1000"}, "X-Ratelimit-Remaining-Tokens": {"900"}}
	info, _ := ParseHeaders(h, ietfNow)
	units := map[string]Unit{}
	for _, q := range info.Quotas {
		units[q.Name] = q.Unit
	}
	assert.Equal(t, map[string]Unit{"tokens": UnitRequests, "tokens#2": UnitTokens}, units)
	assert.Equal(t, "tokens", UnitTokens.String())
	assert.Equal(t, "requests", UnitRequests.String())
}

// Every field of the grammar's reading reaches the caller: several
// conventions at once, more quotas than a reading holds inline, tokens, windows, a policy's unknown Remaining, names made
// unique, the wait, the bucket and the scope; the same through the
// Transport's reading (response.Read, then infoOf) of a 429, whose
// Retry-After is a wait (a success's is none), as through ParseHeaders.
func TestParseHeadersCarriesEveryFieldOfTheReading(t *testing.T) {
	now := time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)
	h := http.Header{
		"Ratelimit-Policy":                            {`"burst";q=100;w=60`},
		"Anthropic-Ratelimit-Requests-Limit":          {"50"},
		"Anthropic-Ratelimit-Requests-Remaining":      {"49"},
		"Anthropic-Ratelimit-Requests-Reset":          {"2025-08-21T12:40:59Z"},
		"Anthropic-Ratelimit-Tokens-Remaining":        {"89000"},
		"Anthropic-Ratelimit-Output-Tokens-Limit":     {"10000"},
		"Anthropic-Ratelimit-Output-Tokens-Remaining": {"10000"},
		"X-Shopify-Shop-Api-Call-Limit":               {"32/40"},
		"X-Ratelimit-Bucket":                          {"abcd1234"},
		"X-Ratelimit-Global":                          {"true"},
		"Retry-After":                                 {"20"},
	}
	want := Info{
		Quotas: []Quota{
			{Name: "burst", Limit: 100, Remaining: -1, Window: time.Minute},
			{Name: "requests", Limit: 50, Remaining: 49, Reset: now.Add(59 * time.Second)},
			{Name: "tokens", Remaining: 89000, Unit: UnitTokens},
			{Name: "output-tokens", Limit: 10000, Remaining: 10000, Unit: UnitTokens},
			{Name: "", Limit: 40, Remaining: 8},
		},
		RetryAfter: 20 * time.Second,
		Bucket:     "abcd1234",
		Global:     true,
	}
	info, ok := ParseHeaders(h, now)
	require.True(t, ok)
	assert.Equal(t, want, info)

	m := meaningOf(&http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: http.NoBody}, now)
	assert.Equal(t, want, infoOf(m.Info, &m.Quotas))
	m = meaningOf(&http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody}, now)
	assert.Zero(t, m.RetryAfter, "a success's Retry-After is no wait")

	response.Read(m, &http.Response{StatusCode: http.StatusOK, Header: http.Header{"X-Ratelimit-Remaining": {"7"}}, Body: http.NoBody}, now, capsOf(0), nil)
	assert.Equal(t, Info{Quotas: []Quota{{Remaining: 7}}}, infoOf(m.Info, &m.Quotas), "a Meaning read again holds the last response's quotas alone")
}

// Quota is the grammar's quota, field for field, so that no field is lost
// on the way: a field added to one must be added to the other (and to
// copyQuotas).
func TestQuotaHasTheGrammarsFields(t *testing.T) {
	ours, theirs := reflect.TypeFor[Quota](), reflect.TypeFor[header.Quota]()
	require.Equal(t, theirs.NumField(), ours.NumField())
	for i := range ours.NumField() {
		o, g := ours.Field(i), theirs.Field(i)
		assert.Equal(t, g.Name, o.Name)
		assert.Equal(t, g.Type.Kind(), o.Type.Kind(), o.Name)
		if o.Name != "Unit" {
			assert.Equal(t, g.Type, o.Type, o.Name)
		}
	}
}
