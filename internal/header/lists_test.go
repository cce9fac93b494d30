package header

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Brave's Search API states a per-second and a monthly quota in X-RateLimit
// fields that are comma lists, read by position (its documented example:
// 1 request per second, 15000 per month of 2592000 s, 1 and 1000 left, the
// second over in 1 s and the month in 1419704 s).
func TestParseBraveLists(t *testing.T) {
	now := ietfNow
	in := func(s float64) time.Time { return now.Add(time.Duration(s * float64(time.Second))) }
	const month = 2592000 * time.Second
	brave := func(kv ...string) http.Header {
		h := http.Header{
			"X-Ratelimit-Policy":    {"1;w=1, 15000;w=2592000"},
			"X-Ratelimit-Limit":     {"1, 15000"},
			"X-Ratelimit-Remaining": {"1, 1000"},
			"X-Ratelimit-Reset":     {"1, 1419704"},
		}
		return withFields(h, kv...)
	}
	documented := quotas(q("", 1, 1, in(1), time.Second), q("#2", 15000, 1000, in(1419704), month))
	runHeaderCases(t, []headerCase{
		{"documented example: two quotas, each with its window, what is left and its reset", now, brave(), documented},
		{"hand-built lower-case keys", now, http.Header{
			"x-ratelimit-policy": {"1;w=1, 15000;w=2592000"}, "x-ratelimit-limit": {"1, 15000"},
			"x-ratelimit-remaining": {"1, 1000"}, "x-ratelimit-reset": {"1, 1419704"},
		}, documented},
		{"lists split over several lines are joined", now, http.Header{
			"X-Ratelimit-Policy": {"1;w=1", "15000;w=2592000"}, "X-Ratelimit-Limit": {"1", "15000"},
			"X-Ratelimit-Remaining": {"1", "1000"}, "X-Ratelimit-Reset": {"1", "1419704"},
		}, documented},
		{"without the policy field the windows are unknown", now, brave("X-Ratelimit-Policy", ""),
			quotas(q("", 1, 1, in(1), 0), q("#2", 15000, 1000, in(1419704), 0))},
		{"policy alone: limits and windows, nothing stated of what is left", now,
			http.Header{"X-Ratelimit-Policy": {"1;w=1, 15000;w=2592000"}},
			quotas(q("", 1, unstated, noReset, time.Second), q("#2", 15000, unstated, noReset, month))},
		{"a 429 with the per-second quota spent", now, brave("X-Ratelimit-Remaining", "0, 999", "X-Ratelimit-Reset", "1, 1419703"),
			quotas(q("", 1, 0, in(1), time.Second), q("#2", 15000, 999, in(1419703), month))},
		{"used counts derive what is left, by position", now, brave("X-Ratelimit-Policy", "", "X-Ratelimit-Remaining", "",
			"X-Ratelimit-Used", "1, 14000"),
			quotas(q("", 1, 0, in(1), 0), q("#2", 15000, 1000, in(1419704), 0))},
		{"reset-after wins over reset at its position", now, brave("X-Ratelimit-Reset-After", "0.5, 100"),
			quotas(q("", 1, 1, in(0.5), time.Second), q("#2", 15000, 1000, in(100), month))},
		{"an epoch reset member is read as a single reset is", now,
			brave("X-Ratelimit-Reset", "1, "+strconv.FormatInt(now.Add(time.Hour).Unix(), 10)),
			quotas(q("", 1, 1, in(1), time.Second), q("#2", 15000, 1000, in(3600), month))},
		{"a date reset beside a policy is the first quota's: its comma makes no list", now, http.Header{
			"X-Ratelimit-Policy": {"20;w=3600"}, "X-Ratelimit-Remaining": {"19"},
			"X-Ratelimit-Reset": {"Mon, 21 Oct 2024 10:00:00 GMT"},
		}, quotas(q("", 20, 19, in(3600), time.Hour))},
		// Lists of different lengths: paired by position as far as they go.
		{"remaining for the first quota only", now, brave("X-Ratelimit-Remaining", "1"),
			quotas(q("", 1, 1, in(1), time.Second), q("#2", 15000, unstated, in(1419704), month))},
		{"more remaining counts than limits", now, http.Header{
			"X-Ratelimit-Limit": {"1"}, "X-Ratelimit-Remaining": {"1, 1000"}, "X-Ratelimit-Reset": {"1, 1419704"},
		}, quotas(q("", 1, 1, in(1), 0), q("#2", 0, 1000, in(1419704), 0))},
		{"a reset with no quota at its position is no quota", now, brave("X-Ratelimit-Reset", "1, 1419704, 5"), documented},
		{"a reset list shorter than the quotas leaves the rest without one", now, brave("X-Ratelimit-Reset", "1"),
			quotas(q("", 1, 1, in(1), time.Second), q("#2", 15000, 1000, noReset, month))},
		{"a limit list longer than the policies keeps its own figures", now, brave("X-Ratelimit-Limit", "1, 15000, 7"),
			quotas(q("", 1, 1, in(1), time.Second), q("#2", 15000, 1000, in(1419704), month), q("#3", 7, unstated, noReset, 0))},
		// Malformed variants.
		{"remaining above its limit clamped", now, brave("X-Ratelimit-Remaining", "5, 99999"),
			quotas(q("", 1, 1, in(1), time.Second), q("#2", 15000, 15000, in(1419704), month))},
		{"a remaining list with a member that is not a number is ignored as a whole", now,
			brave("X-Ratelimit-Remaining", "1, lots"),
			quotas(q("", 1, unstated, in(1), time.Second), q("#2", 15000, unstated, in(1419704), month))},
		{"a trailing comma makes no list", now, brave("X-Ratelimit-Remaining", "1, 1000,"),
			quotas(q("", 1, unstated, in(1), time.Second), q("#2", 15000, unstated, in(1419704), month))},
		{"negative members ignored", now, brave("X-Ratelimit-Remaining", "-1, 1000", "X-Ratelimit-Reset", "1, -5"),
			quotas(q("", 1, unstated, noReset, time.Second), q("#2", 15000, unstated, noReset, month))},
		{"an absurd digit string remaining is unknown at its position", now,
			brave("X-Ratelimit-Remaining", "1, "+strings.Repeat("9", 400)),
			quotas(q("", 1, 1, in(1), time.Second), q("#2", 15000, unstated, in(1419704), month))},
		{"a delta reset beyond MaxResetHorizon clamped to it", now, brave("X-Ratelimit-Reset", "1, 99999999"),
			quotas(q("", 1, 1, in(1), time.Second), q("#2", 15000, 1000, now.Add(maxResetHorizon), month))},
		{"a policy member that is not a number leaves its position to the limit", now,
			brave("X-Ratelimit-Policy", "?1;w=1, 15000;w=2592000"),
			quotas(q("", 1, 1, in(1), 0), q("#2", 15000, 1000, in(1419704), month))},
		{"a policy in other units is not reported", now,
			brave("X-Ratelimit-Policy", `1;w=1, 15000;w=2592000;qu="content-bytes"`),
			quotas(q("", 1, 1, in(1), time.Second))},
		{"a policy field that is not a structured list ignored as a whole", now,
			brave("X-Ratelimit-Policy", "1;w=1, 15000;w=2592000,"),
			quotas(q("", 1, 1, in(1), 0), q("#2", 15000, 1000, in(1419704), 0))},
	})
}

// However long the lists, at most maxQuotas positions are read.
func TestParseBraveListsAreBounded(t *testing.T) {
	var counts []string
	for i := range 40 {
		counts = append(counts, strconv.Itoa(i+1))
	}
	list := strings.Join(counts, ", ")
	h := http.Header{"X-Ratelimit-Policy": {list}, "X-Ratelimit-Limit": {list},
		"X-Ratelimit-Remaining": {list}, "X-Ratelimit-Reset": {list}}
	info, ok := parse(h, ietfNow)
	require.True(t, ok)
	require.Len(t, info.Quotas, maxQuotas)
	last := info.Quotas[maxQuotas-1]
	assert.Equal(t, float64(maxQuotas), last.Limit)
	assert.Equal(t, float64(maxQuotas), last.Remaining)
	assert.Equal(t, ietfNow.Add(maxQuotas*time.Second), last.Reset)
}
