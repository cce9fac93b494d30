package header

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseIETFDraft08AndLater(t *testing.T) {
	now := ietfNow
	in30s := now.Add(30 * time.Second)
	burstDaily := `"burst";q=100;w=60,"daily";q=1000;w=86400`
	runHeaderCases(t, []headerCase{
		{"named policy with its state", now, http.Header{
			"Ratelimit": {`"default";r=50;t=30`}, "Ratelimit-Policy": {`"default";q=100;w=60`},
		}, quotas(q("default", 100, 50, in30s, time.Minute))},
		{"two policies, state for one", now, http.Header{
			"Ratelimit": {`"burst";r=50;t=30`}, "Ratelimit-Policy": {burstDaily},
		}, quotas(q("burst", 100, 50, in30s, time.Minute), q("daily", 1000, unstated, noReset, 24*time.Hour))},
		{"state for both, in the other order", now, http.Header{
			"Ratelimit": {`"daily";r=900;t=3000, "burst";r=50;t=30`}, "Ratelimit-Policy": {burstDaily},
		}, quotas(q("burst", 100, 50, in30s, time.Minute), q("daily", 1000, 900, now.Add(50*time.Minute), 24*time.Hour))},
		{"state naming no known policy", now, http.Header{
			"Ratelimit": {`"default";r=50;t=30`}, "Ratelimit-Policy": {burstDaily},
		}, quotas(q("burst", 100, unstated, noReset, time.Minute), q("daily", 1000, unstated, noReset, 24*time.Hour),
			q("default", 0, 50, in30s, 0))},
		{"Cloudflare lower-case names and token policy names", now, http.Header{
			"ratelimit": {`default;r=50;t=30`}, "ratelimit-policy": {`default;q=100;w=60`},
		}, quotas(q("default", 100, 50, in30s, time.Minute))},
		{"policy split over two lines", now, http.Header{
			"Ratelimit":        {`"burst";r=50;t=30`},
			"Ratelimit-Policy": {`"burst";q=100;w=60`, `"daily";q=1000;w=86400`},
		}, quotas(q("burst", 100, 50, in30s, time.Minute), q("daily", 1000, unstated, noReset, 24*time.Hour))},
		{"state split over two lines", now, http.Header{
			"Ratelimit":        {`"burst";r=50;t=30`, `"daily";r=10;t=30`},
			"Ratelimit-Policy": {burstDaily},
		}, quotas(q("burst", 100, 50, in30s, time.Minute), q("daily", 1000, 10, in30s, 24*time.Hour))},
		{"unknown parameters, qu=requests and a partition key", now, http.Header{
			"Ratelimit":        {`"peruser";r=5;t=1;pk=:cHJvamVjdDEyMw==:;x-new=?1`},
			"Ratelimit-Policy": {`"peruser";q=10;w=1;qu="requests";pk=:cHJvamVjdDEyMw==:;foo=bar`},
		}, quotas(q("peruser", 10, 5, now.Add(time.Second), time.Second))},
		{"policies counted in other units are not reported", now, http.Header{
			"Ratelimit":        {`"bytes";r=5000;t=1, "conc";r=2`},
			"Ratelimit-Policy": {`"bytes";q=10000;w=1;qu="content-bytes", "conc";q=10;qu="concurrent-requests"`},
		}, parsed{}},
		// The server said nothing of what is left: not full, not empty.
		{"policy alone", now, http.Header{"Ratelimit-Policy": {burstDaily}},
			quotas(q("burst", 100, unstated, noReset, time.Minute), q("daily", 1000, unstated, noReset, 24*time.Hour))},
		{"escaped policy name", now, http.Header{
			"Ratelimit": {`"a\"b\\c";r=1`}, "Ratelimit-Policy": {`"a\"b\\c";q=2`},
		}, quotas(q(`a"b\c`, 2, 1, noReset, 0))},
		{"duplicate parameter: the last wins", now, http.Header{
			"Ratelimit": {`"default";r=50;r=40`}, "Ratelimit-Policy": {`"default";q=100;q=90`},
		}, quotas(q("default", 90, 40, noReset, 0))},
		// Malformed variants.
		{"state with a trailing comma ignored as a whole", now, http.Header{
			"Ratelimit": {`"burst";r=50;t=30,`}, "Ratelimit-Policy": {`"burst";q=100;w=60`},
		}, quotas(q("burst", 100, unstated, noReset, time.Minute))},
		{"policy with an exponent ignored as a whole", now, http.Header{
			"Ratelimit": {`"burst";r=50;t=30`}, "Ratelimit-Policy": {`"burst";q=1e3;w=60`},
		}, quotas(q("burst", 0, 50, in30s, 0))},
		{"negative remaining and quota ignored", now, http.Header{
			"Ratelimit": {`"burst";r=-5;t=30`}, "Ratelimit-Policy": {`"burst";q=-100;w=60`},
		}, parsed{}},
		{"wrongly typed parameters ignored", now, http.Header{
			"Ratelimit": {`"burst";r="50";t=30`}, "Ratelimit-Policy": {`"burst";q=100;w="60"`},
		}, quotas(q("burst", 100, unstated, in30s, 0))},
		{"wrongly typed or negative reset ignored", now, http.Header{
			"Ratelimit": {`"a";r=1;t="30", "b";r=2;t=-30, "c";r=3;t=?1`},
		}, quotas(q("a", 0, 1, noReset, 0), q("b", 0, 2, noReset, 0), q("c", 0, 3, noReset, 0))},
		{"zero and absurd windows ignored", now, http.Header{
			"Ratelimit-Policy": {`"a";q=1;w=0, "b";q=2;w=999999999999`},
		}, quotas(q("a", 1, unstated, noReset, 0), q("b", 2, unstated, noReset, 0))},
		{"state a day ahead reported as stated", now, http.Header{"Ratelimit": {`"x";r=1;t=86399`}},
			quotas(q("x", 0, 1, now.Add(86399*time.Second), 0))},
		{"remaining above the quota clamped", now, http.Header{
			"Ratelimit": {`"burst";r=500`}, "Ratelimit-Policy": {`"burst";q=100`},
		}, quotas(q("burst", 100, 100, noReset, 0))},
		{"inner lists and non-name items skipped", now, http.Header{
			"Ratelimit": {`(1 2);r=1, ?1;r=2, "ok";r=3`}, "Ratelimit-Policy": {`(1 2);q=1, :AAAA:;q=2`},
		}, quotas(q("ok", 0, 3, noReset, 0))},
		{"overlong policy name ignored", now, http.Header{
			"Ratelimit-Policy": {`"` + strings.Repeat("n", 300) + `";q=1`},
		}, parsed{}},
		{"empty fields", now, http.Header{"Ratelimit": {""}, "Ratelimit-Policy": {" "}}, parsed{}},
	})
}

// The renaming proposed in 2026 for the RateLimit field: a (available
// quota) for r, w (effective window, seconds) for t. Drafts 08 to 11 still
// define r and t; both forms are read, and they mean the same.
func TestParseIETFProposedAvailableAndWindow(t *testing.T) {
	now := ietfNow
	in30s := now.Add(30 * time.Second)
	policy := http.Header{"Ratelimit-Policy": {`"default";q=100;w=60`}}
	with := func(rl string) http.Header {
		h := policy.Clone()
		h["Ratelimit"] = []string{rl}
		return h
	}
	state := quotas(q("default", 100, 50, in30s, time.Minute))
	runHeaderCases(t, []headerCase{
		{"older form, for comparison", now, with(`"default";r=50;t=30`), state},
		{"new form: a is what is left, w when more is available", now, with(`"default";a=50;w=30`), state},
		{"the proposal's own example", now, http.Header{
			"Ratelimit-Policy": {`"burst";q=100;w=60`}, "Ratelimit": {`"burst";a=80;w=45`},
		}, quotas(q("burst", 100, 80, now.Add(45*time.Second), time.Minute))},
		{"a per-request cost c is a comment", now, with(`"default";a=50;w=30;c=2`), state},
		{"new form without a policy: no limit, no policy window", now, http.Header{"Ratelimit": {`"default";a=50;w=30`}},
			quotas(q("default", 0, 50, in30s, 0))},
		{"Cloudflare-style token name", now, http.Header{
			"ratelimit": {`default;a=50;w=30`}, "ratelimit-policy": {`default;q=100;w=60`},
		}, state},
		{"both forms in one item: r and t, the drafts' names, win", now, with(`"default";r=40;t=20;a=50;w=30`),
			quotas(q("default", 100, 40, now.Add(20*time.Second), time.Minute))},
		{"forms mixed: r with w", now, with(`"default";r=50;w=30`), state},
		{"nothing left, more in 0 s: the window is over", now, with(`"default";a=0;w=0`),
			quotas(q("default", 100, 0, now, time.Minute))},
		// Malformed variants.
		{"a wrongly typed a leaves what is left unknown", now, with(`"default";a="50";w=30`),
			quotas(q("default", 100, unstated, in30s, time.Minute))},
		{"negative a and w ignored", now, with(`"default";a=-5;w=-30`),
			quotas(q("default", 100, unstated, noReset, time.Minute))},
		{"a above the quota clamped", now, with(`"default";a=500;w=30`),
			quotas(q("default", 100, 100, in30s, time.Minute))},
		{"a boolean w ignored", now, with(`"default";a=50;w`),
			quotas(q("default", 100, 50, noReset, time.Minute))},
	})
}

func TestParseIETFOlderDrafts(t *testing.T) {
	now := ietfNow
	runHeaderCases(t, []headerCase{
		{"draft-07 dictionary", now, http.Header{
			"Ratelimit": {"limit=100, remaining=50, reset=5"}, "Ratelimit-Policy": {"100;w=10"},
		}, quotas(q("", 100, 50, now.Add(5*time.Second), 10*time.Second))},
		{"draft-07 with a second policy", now, http.Header{
			"Ratelimit": {"limit=10, remaining=5, reset=1"}, "Ratelimit-Policy": {"10;w=1, 50;w=60"},
		}, quotas(q("", 10, 5, now.Add(time.Second), time.Second), q("#2", 50, unstated, noReset, time.Minute))},
		{"draft-07 naming its policy", now, http.Header{
			"Ratelimit": {"limit=100, remaining=50, reset=5"}, "Ratelimit-Policy": {`"default";q=100;w=10`},
		}, quotas(q("default", 100, 50, now.Add(5*time.Second), 10*time.Second))},
		{"draft-07 duplicate key: the last wins", now, http.Header{
			"Ratelimit": {"limit=100, remaining=50, remaining=40"},
		}, quotas(q("", 100, 40, noReset, 0))},
		{"draft-04 separate fields with a policy", now, http.Header{
			"Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"5"}, "Ratelimit-Reset": {"7"},
			"Ratelimit-Policy": {"10;w=1, 50;w=60"},
		}, quotas(q("", 10, 5, now.Add(7*time.Second), time.Second), q("#2", 50, unstated, noReset, time.Minute))},
		{"draft-00 separate fields", now, http.Header{
			"Ratelimit-Limit": {"100"}, "Ratelimit-Remaining": {"50"}, "Ratelimit-Reset": {"50"},
		}, quotas(q("", 100, 50, now.Add(50*time.Second), 0))},
		{"draft-01 list limit", now, http.Header{
			"Ratelimit-Limit": {"10, 10;w=1, 50;w=60"}, "Ratelimit-Remaining": {"9"}, "Ratelimit-Reset": {"1"},
		}, quotas(q("", 10, 9, now.Add(time.Second), time.Second), q("#2", 50, unstated, noReset, time.Minute))},
		{"polli-00 window parameter and HTTP-date reset", now, http.Header{
			"Ratelimit-Limit": {"100, 100;window=10"}, "Ratelimit-Remaining": {"50"},
			"Ratelimit-Reset": {"Mon, 21 Oct 2024 09:00:10 GMT"},
		}, quotas(q("", 100, 50, now.Add(10*time.Second), 10*time.Second))},
		{"limit with its own window", now, http.Header{"Ratelimit-Limit": {"100;w=10"}},
			quotas(q("", 100, unstated, noReset, 10*time.Second))},
		{"newest draft wins over the older fields", now, http.Header{
			"Ratelimit": {`"default";r=50;t=30`}, "Ratelimit-Policy": {`"default";q=100;w=60`},
			"Ratelimit-Limit": {"7"}, "Ratelimit-Remaining": {"1"},
		}, quotas(q("default", 100, 50, now.Add(30*time.Second), time.Minute))},
		// Malformed variants.
		{"draft-07 with a 16-digit integer ignored", now, http.Header{
			"Ratelimit": {"limit=1000000000000000, remaining=50"}, "Ratelimit-Limit": {"100"},
		}, quotas(q("", 100, unstated, noReset, 0))},
		{"draft-07 with negative and boolean members", now, http.Header{
			"Ratelimit": {"limit=-1, remaining=5, reset"},
		}, quotas(q("", 0, 5, noReset, 0))},
		{"draft-07 without counts falls back to the older fields", now, http.Header{
			"Ratelimit": {"reset=5"}, "Ratelimit-Remaining": {"3"},
		}, quotas(q("", 0, 3, noReset, 0))},
		{"older fields with garbage", now, http.Header{
			"Ratelimit-Limit": {"ten"}, "Ratelimit-Remaining": {"NaN"}, "Ratelimit-Reset": {"-5"},
		}, parsed{}},
		{"decimal with four fractional digits", now, http.Header{"Ratelimit-Limit": {"10.0001, 5"}}, parsed{}},
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 27, 0, 0, time.UTC)
	retry := func(d time.Duration) parsed { return parsed{RetryAfter: d} }
	runHeaderCases(t, []headerCase{
		{"delta seconds", now, http.Header{"Retry-After": {"120"}}, retry(2 * time.Minute)},
		{"surrounding whitespace in a hand-built header", now, http.Header{"Retry-After": {" \t120\t "}}, retry(2 * time.Minute)},
		{"decimal seconds", now, http.Header{"Retry-After": {"2.5"}}, retry(2500 * time.Millisecond)},
		{"IMF-fixdate", now, http.Header{"Retry-After": {"Wed, 21 Oct 2015 07:28:00 GMT"}}, retry(time.Minute)},
		{"obsolete RFC 850 date", now, http.Header{"Retry-After": {"Wednesday, 21-Oct-15 07:28:00 GMT"}}, retry(time.Minute)},
		{"obsolete asctime date", now, http.Header{"Retry-After": {"Wed Oct 21 07:28:00 2015"}}, retry(time.Minute)},
		{"Retry-After-Ms wins", now, http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, retry(1500 * time.Millisecond)},
		{"lower-case retry-after-ms", now, http.Header{"retry-after-ms": {"250.5"}}, retry(250500 * time.Microsecond)},
		{"Azure x-ms-retry-after-ms", now, http.Header{"x-ms-retry-after-ms": {"900"}, "Retry-After": {"1"}}, retry(900 * time.Millisecond)},
		{"garbage Retry-After-Ms falls back", now, http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"2"}}, retry(2 * time.Second)},
		{"beyond the cap clamped", now, http.Header{"Retry-After": {"86400"}}, retry(defaultMaxDelay)},
		{"absurd digit string clamped", now, http.Header{"Retry-After": {strings.Repeat("9", 400)}}, retry(defaultMaxDelay)},
		{"absurd milliseconds clamped", now, http.Header{"Retry-After-Ms": {"99999999999999999999"}}, retry(defaultMaxDelay)},
		{"date far ahead clamped", now, http.Header{"Retry-After": {"Fri, 31 Dec 9999 23:59:59 GMT"}}, retry(defaultMaxDelay)},
		// Malformed variants: all ignored.
		{"negative", now, http.Header{"Retry-After": {"-5"}}, parsed{}},
		{"NaN", now, http.Header{"Retry-After": {"NaN"}}, parsed{}},
		{"Inf", now, http.Header{"Retry-After": {"Inf"}}, parsed{}},
		{"exponent", now, http.Header{"Retry-After": {"1e309"}}, parsed{}},
		{"trailing dot", now, http.Header{"Retry-After": {"2."}}, parsed{}},
		{"text", now, http.Header{"Retry-After": {"soon"}}, parsed{}},
		{"empty", now, http.Header{"Retry-After": {""}}, parsed{}},
		{"no value lines", now, http.Header{"Retry-After": {}}, parsed{}},
	})
}

// A valid Retry-After that asks for no wait is information (retry at once),
// even though it leaves Info zero.
func TestParseReportsAZeroRetryAfter(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 27, 0, 0, time.UTC)
	for _, v := range []string{"0", "0.0", "Wed, 21 Oct 2015 07:00:00 GMT"} {
		info, ok := parse(http.Header{"Retry-After": {v}}, now)
		assert.True(t, ok, "Retry-After: %s", v)
		assert.Zero(t, info, "Retry-After: %s", v)
	}
}
