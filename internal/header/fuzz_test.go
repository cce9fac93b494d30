package header

import (
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fuzzSeeds are real header sets of every convention, one "Key: value" per
// line, plus hostile ones; the fuzzer mutates them.
var fuzzSeeds = []string{
	"X-RateLimit-Limit: 5000\nX-RateLimit-Remaining: 4997\nX-RateLimit-Reset: 1666132381\nX-RateLimit-Used: 3\nX-RateLimit-Resource: core",
	"x-rate-limit-limit: 900\nx-rate-limit-remaining: 847\nx-rate-limit-reset: 1705420800",
	"x-ratelimit-used: 1\nx-ratelimit-remaining: 599.0\nx-ratelimit-reset: 583",
	"X-RateLimit-Limit: 10\nX-RateLimit-Remaining: 0\nX-RateLimit-Reset: 1470173023.123\nX-RateLimit-Reset-After: 64.57\nX-RateLimit-Bucket: abcd1234\nX-RateLimit-Scope: user\nRetry-After: 65",
	"X-RateLimit-Global: true\nX-RateLimit-Scope: global\nRetry-After: 65",
	"x-ratelimit-limit-requests: 60\nx-ratelimit-limit-tokens: 150000\nx-ratelimit-remaining-requests: 59\nx-ratelimit-remaining-tokens: 149984\nx-ratelimit-reset-requests: 1s\nx-ratelimit-reset-tokens: 6m0s",
	"x-ratelimit-reset-requests: 2m59.56s\nx-ratelimit-reset-tokens: 12ms\nretry-after-ms: 1500\nx-ms-retry-after-ms: 900",
	"anthropic-ratelimit-requests-limit: 50\nanthropic-ratelimit-requests-remaining: 49\nanthropic-ratelimit-requests-reset: 2025-08-21T12:40:59Z\nanthropic-ratelimit-input-tokens-remaining: 1000",
	"X-Shopify-Shop-Api-Call-Limit: 32/40\nRetry-After: 2.0",
	"X-RateLimit-Policy: 1;w=1, 15000;w=2592000\nX-RateLimit-Limit: 1, 15000\nX-RateLimit-Remaining: 1, 1000\nX-RateLimit-Reset: 1, 1419704",
	"X-RateLimit-Limit: 1\nX-RateLimit-Remaining: 1, 1000, 5\nX-RateLimit-Used: 0, 1\nX-RateLimit-Reset-After: 0.5, 99999999999999999999\nX-RateLimit-Reset: Tue, 16 Jan 2024 16:00:00 GMT",
	"x-ratelimit-policy: \"a\";q=5;w=60, 7;qu=\"content-bytes\", ?1\nx-ratelimit-remaining: 9, -1, 3\nx-ratelimit-reset: 1,",
	"RateLimit: \"default\";r=50;t=30\nRateLimit-Policy: \"burst\";q=100;w=60,\"daily\";q=1000;w=86400",
	"RateLimit: \"default\";a=50;w=30;c=2, x;a=-1;w=\"z\", \"y\";r=1;a=2;t=3;w=4\nRateLimit-Policy: \"default\";q=100;w=60",
	"RateLimit-Policy: \"burst\";q=100;w=60\nRateLimit-Policy: \"daily\";q=1000;w=86400;qu=\"requests\";pk=:cHJvamVjdDEyMw==:",
	"RateLimit: limit=100, remaining=50, reset=5\nRateLimit-Policy: 100;w=10",
	"RateLimit-Limit: 10, 10;w=1, 50;w=60\nRateLimit-Remaining: 9\nRateLimit-Reset: 1",
	"RateLimit-Limit: 100, 100;window=10\nRateLimit-Reset: Mon, 21 Oct 2024 09:00:10 GMT",
	"Retry-After: Wed, 21 Oct 2015 07:28:00 GMT",
	"Retry-After: Wednesday, 21-Oct-15 07:28:00 GMT\nretry-after: Wed Oct 21 07:28:00 2015",
	"X-RateLimit-Reset: Tue Jan 16 2024 17:00:00 GMT+0100 (CET)\nX-RateLimit-Remaining: 1",
	"RateLimit: %\"f%c3%bc\";r=1, (1 2);r=2, ?1, @1659578233, :aGVsbG8=:\nRateLimit-Policy: \"a\\\"b\";q=1.5;w=0.5",
	"Retry-After: -1\nX-RateLimit-Limit: NaN\nX-RateLimit-Remaining: Inf\nX-RateLimit-Reset: 1e309",
	"Retry-After: 99999999999999999999999999\nX-RateLimit-Remaining: 9999\nX-RateLimit-Limit: 5",
	"X-Ratelimit-Limit: 600,30000\nX-Ratelimit-Usage: 314,27536\nX-ReadRateLimit-Limit: 100,1000\nX-ReadRateLimit-Usage: ,",
	"X-HubSpot-RateLimit-Daily: 250000\nX-HubSpot-RateLimit-Daily-Remaining: 249990\nX-HubSpot-RateLimit-Secondly: 10\nX-HubSpot-RateLimit-Secondly-Remaining: 9",
	"X-HubSpot-RateLimit-Max: 100\nX-HubSpot-RateLimit-Remaining: 99\nX-HubSpot-RateLimit-Interval-Milliseconds: 10000",
	"x-ratelimitbysize-limit-minute: 500000\nx-ratelimitbysize-remaining-minute: 480000\nx-ratelimitbysize-limit-month: 1000000000\nx-ratelimitbysize-remaining-month: 999000000\nratelimitbysize-limit: 500000\nratelimitbysize-remaining: 480000\nratelimitbysize-reset: 42\nratelimitbysize-query-cost: 20000",
	"x-app-usage: {\"call_count\":28,\"total_time\":25,\"total_cputime\":25}\nx-page-usage: {\"call_count\":911,\"total_cputime\":1e3,\"total_time\":-1}",
	"x-business-use-case-usage: {\"1234\":[{\"type\":\"ads_management\",\"call_count\":100,\"total_cputime\":25,\"total_time\":25,\"estimated_time_to_regain_access\":19}]}",
	"x-business-use-case-usage: [[[[[{\"a\":\"\\\"\",\"call_count\":[true,null,1.5]}]]]]]\nx-app-usage: {\"call_count\":\"12",
	"Sforce-Limit-Info: api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)\nSforce-Limit-Info: api-usage=110018/100000; api-bursts=1/750",
	"x-rate-limit-limit: 900\nx-rate-limit-remaining: 897\nx-app-rate-limit-limit: 100000\nx-app-rate-limit-remaining: 99997\nx-app-rate-limit-reset: 1705420800",
	"x-mws-quota-max: 3600.0\nx-mws-quota-remaining: 10.0\nx-mws-quota-resetsOn: 2024-01-16T17:00:00.000Z\nx-mws-timestamp: 2024-01-16T16:50:00.000Z",
	"x-ms-ratelimit-remaining-subscription-reads: 11999\nX-Ms-Ratelimit-Remaining-Subscription-Reads: 5\nx-ms-ratelimit-remaining-resource: Microsoft.Compute/HighCostGet3Min;159",
	"x-ratelimit-limit-project-tokens: 150000000\nx-ratelimit-remaining-project-tokens: 149995870\nx-ratelimit-reset-project-tokens: 1ms\nx-ratelimit-renewalperiod-requests: 60\nx-ratelimit-limit-requests: -1",
	"ratelimit-limit: 100;w=21600\nratelimit-remaining: 76;w=21600",
	"RateLimit-Policy: \"fixed window\";\"api\";q=500;w=300, \"x\";\"y\";\"z\"\nRateLimit: \"api\";r=480;t=120",
	"X-RateLimit-Limit: 100\nX-RateLimit-Remaining: 99\nX-RateLimit-FillRate: 0.0000001\nX-RateLimit-Interval-Seconds: 99999999999",
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, int64(1666130401), int64(0))
		f.Add(s, int64(1705420200), int64(600_000))
	}
	f.Fuzz(func(t *testing.T, raw string, nowSec, capMs int64) {
		h := http.Header{}
		for _, line := range strings.Split(raw, "\n") {
			k, v, _ := strings.Cut(line, ":")
			h[k] = append(h[k], strings.TrimLeft(v, " ")) // keys as given: any case
		}
		// Any instant from about 1140 to 2800, any cap up to about 35 years
		// (negative and zero mean the default).
		now := time.Unix(nowSec%(1<<35), 0).UTC()
		maxDelay := time.Duration(capMs%(1<<40)) * time.Millisecond
		if maxDelay <= 0 {
			maxDelay = defaultMaxDelay
		}
		info, ok := parse(h, now, maxDelay)
		checkInfo(t, info, ok, now, maxDelay)

		// Go randomises map order: the answer must not depend on it.
		again, okAgain := parse(h, now, maxDelay)
		if okAgain != ok || !reflect.DeepEqual(again, info) {
			t.Fatalf("not deterministic:\n%+v\n%+v", info, again)
		}

		for _, vs := range h {
			for _, v := range vs {
				if d, ok := retryAfter(v, now, defaultMaxDelay); d < 0 || d > defaultMaxDelay || (!ok && d != 0) {
					t.Fatalf("retryAfter(%q) = %v, %v", v, d, ok)
				}
			}
		}
	})
}

// checkInfo asserts the invariants Parse promises whatever the input.
func checkInfo(t *testing.T, info parsed, ok bool, now time.Time, maxDelay time.Duration) {
	t.Helper()
	if !ok && !reflect.DeepEqual(info, parsed{}) {
		t.Fatalf("ok=false with non-zero Info %+v", info)
	}
	if info.RetryAfter < 0 || info.RetryAfter > maxDelay {
		t.Fatalf("RetryAfter %v outside [0, %v]", info.RetryAfter, maxDelay)
	}
	if math.IsNaN(info.Cost) || math.IsInf(info.Cost, 0) || info.Cost < 0 {
		t.Fatalf("non-finite or negative cost %v", info.Cost)
	}
	if len(info.Bucket) > maxNameLen || len(info.Quotas) > maxQuotas {
		t.Fatalf("unbounded: bucket %d bytes, %d quotas", len(info.Bucket), len(info.Quotas))
	}
	names := map[string]bool{}
	for _, q := range info.Quotas {
		if names[q.Name] {
			t.Fatalf("quota name %q used twice in %+v", q.Name, info.Quotas)
		}
		names[q.Name] = true
		for _, x := range []float64{q.Limit, q.Remaining} {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 && !(x == q.Remaining && x == unstated) {
				t.Fatalf("non-finite or negative count in %+v", q)
			}
		}
		if q.Limit > 0 && q.Remaining > q.Limit {
			t.Fatalf("remaining above limit in %+v", q)
		}
		if horizon := max(maxResetHorizon, maxDelay); !q.Reset.IsZero() && (q.Reset.Before(now.Add(-time.Second)) || q.Reset.After(now.Add(horizon))) {
			t.Fatalf("reset %v outside [now-1s, now+%v] (now %v)", q.Reset, horizon, now)
		}
		if q.Window < 0 || q.Window > maxWindowSeconds*time.Second || len(q.Name) > maxNameLen+3*maxQuotas {
			t.Fatalf("bad window or name in %+v", q)
		}
	}
}
