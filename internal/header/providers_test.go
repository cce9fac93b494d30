package header

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// in is now plus s seconds.
func in(now time.Time, s float64) time.Time { return now.Add(time.Duration(s * float64(time.Second))) }

// stated is a Skew with a fixed offset that records the dates it is handed.
type stated struct {
	offset time.Duration
	dates  []string
}

func (s *stated) Observe(date string, _ time.Time) { s.dates = append(s.dates, date) }
func (s *stated) Offset(time.Time) time.Duration   { return s.offset }

// parseSkewed is parse with the Skew skew.
func parseSkewed(h http.Header, now time.Time, skew Skew) []Quota {
	var qs Quotas
	Parse(h, now, Caps{Wait: defaultMaxDelay, Reset: maxResetHorizon}, skew, &qs)
	var got []Quota
	for i := range qs.Len() {
		got = append(got, *qs.At(i))
	}
	return got
}

// Strava's documented example (https://developers.strava.com/docs/rate-limits):
// a 15-minute and a daily limit, 600 and 30000, of which 314 and 27536 are
// used, at 20:11:01 UTC; the 15-minute window ends at the next quarter
// hour, the daily one at midnight UTC. Its read ("non-upload") family
// states the same pairs for its own, lower, limits.
func TestParseStrava(t *testing.T) {
	now := time.Date(2020, 10, 10, 20, 11, 1, 0, time.UTC)
	quarter, midnight := time.Date(2020, 10, 10, 20, 15, 0, 0, time.UTC), time.Date(2020, 10, 11, 0, 0, 0, 0, time.UTC)
	const day = 24 * time.Hour
	strava := func(kv ...string) http.Header {
		return withFields(http.Header{"X-Ratelimit-Limit": {"600,30000"}, "X-Ratelimit-Usage": {"314,27536"}}, kv...)
	}
	read := func(usage string) http.Header {
		return strava("X-Readratelimit-Limit", "300,3000", "X-Readratelimit-Usage", usage)
	}
	runHeaderCases(t, []headerCase{
		{"documented successful response", now, strava(),
			quotas(q("15min", 600, 286, quarter, 15*time.Minute), q("daily", 30000, 2464, midnight, day))},
		{"documented rate-limited response: used beyond the limit leaves nothing", in(now, 4), strava("X-Ratelimit-Usage", "692,29300"),
			quotas(q("15min", 600, 0, quarter, 15*time.Minute), q("daily", 30000, 700, midnight, day))},
		{"the read family: four quotas", now, read("314,2536"),
			quotas(q("15min", 600, 286, quarter, 15*time.Minute), q("daily", 30000, 2464, midnight, day),
				q("read-15min", 300, 0, quarter, 15*time.Minute), q("read-daily", 3000, 464, midnight, day))},
		{"an empty read usage (an upload endpoint): the read limits with nothing known of what is left", now, read(","),
			quotas(q("15min", 600, 286, quarter, 15*time.Minute), q("daily", 30000, 2464, midnight, day),
				q("read-15min", 300, unstated, quarter, 15*time.Minute), q("read-daily", 3000, unstated, midnight, day))},
		{"hand-built lower-case keys and spaces", now, http.Header{"x-ratelimit-limit": {"600, 30000"}, "x-ratelimit-usage": {"314, 27536"}},
			quotas(q("15min", 600, 286, quarter, 15*time.Minute), q("daily", 30000, 2464, midnight, day))},
		{"on a quarter hour, the window just begun ends at the next", quarter, strava(),
			quotas(q("15min", 600, 286, quarter.Add(15*time.Minute), 15*time.Minute), q("daily", 30000, 2464, midnight, day))},
		{"a usage that is not a number: nothing known of what is left", now, strava("X-Ratelimit-Usage", "x,-1"),
			quotas(q("15min", 600, unstated, quarter, 15*time.Minute), q("daily", 30000, unstated, midnight, day))},
		{"without a usage, a comma list limit is the IETF drafts' (current limit, then policies)", now,
			strava("X-Ratelimit-Usage", ""), quotas(q("", 600, unstated, noReset, 0), q("#2", 30000, unstated, noReset, 0))},
	})
	t.Run("the resets are computed in the server's clock", func(t *testing.T) {
		// The server's clock is 3 s ahead: its quarter hour comes 3 s
		// sooner by ours.
		got := parseSkewed(strava(), now, &stated{offset: 3 * time.Second})
		require.Len(t, got, 2)
		assert.Equal(t, quarter.Add(-3*time.Second), got[0].Reset)
		assert.Equal(t, midnight.Add(-3*time.Second), got[1].Reset)
	})
}

// HubSpot's headers (https://developers.hubspot.com/docs/api/usage-details):
// with an API key, the daily and per-second quotas; with OAuth or a private
// app's token, the quota of an interval (100 per 10 s in the documented
// limits). None states a reset.
func TestParseHubSpot(t *testing.T) {
	now := ietfNow
	runHeaderCases(t, []headerCase{
		{"API key: daily and per-second", now, http.Header{
			"X-Hubspot-Ratelimit-Daily": {"250000"}, "X-Hubspot-Ratelimit-Daily-Remaining": {"249990"},
			"X-Hubspot-Ratelimit-Secondly": {"10"}, "X-Hubspot-Ratelimit-Secondly-Remaining": {"9"},
		}, quotas(q("daily", 250000, 249990, noReset, 24*time.Hour), q("secondly", 10, 9, noReset, time.Second))},
		{"OAuth: the interval's quota", now, http.Header{
			"X-Hubspot-Ratelimit-Max": {"100"}, "X-Hubspot-Ratelimit-Remaining": {"97"},
			"X-Hubspot-Ratelimit-Interval-Milliseconds": {"10000"},
		}, quotas(q("interval", 100, 97, noReset, 10*time.Second))},
		{"an interval that is not a number leaves the window unknown", now, http.Header{
			"x-hubspot-ratelimit-max": {"100"}, "x-hubspot-ratelimit-remaining": {"97"},
			"x-hubspot-ratelimit-interval-milliseconds": {"soon"},
		}, quotas(q("interval", 100, 97, noReset, 0))},
	})
}

// Mistral's token quotas per minute and per month; Mistral does not
// document these fields, so the values are of the form its API sends.
func TestParseMistral(t *testing.T) {
	now := ietfNow
	mistral := func(kv ...string) http.Header {
		return withFields(http.Header{
			"x-ratelimitbysize-limit-minute": {"500000"}, "x-ratelimitbysize-remaining-minute": {"480000"},
			"x-ratelimitbysize-limit-month": {"1000000000"}, "x-ratelimitbysize-remaining-month": {"999000000"},
			"ratelimitbysize-limit": {"500000"}, "ratelimitbysize-remaining": {"480000"},
			"ratelimitbysize-reset": {"42"}, "ratelimitbysize-query-cost": {"20000"},
		}, kv...)
	}
	minute, month := tok("tokens-minute", 500000, 480000, in(now, 42), time.Minute), tok("tokens-month", 1e9, 999e6, noReset, 0)
	runHeaderCases(t, []headerCase{
		{"the minute's and the month's quotas, and the request's cost", now, mistral(),
			parsed{Quotas: []Quota{minute, month}, Cost: 20000}},
		{"the unprefixed fields repeat the minute's: read in their absence", now,
			mistral("x-ratelimitbysize-limit-minute", "", "x-ratelimitbysize-remaining-minute", ""),
			parsed{Quotas: []Quota{minute, month}, Cost: 20000}},
		{"a cost alone", now, http.Header{"Ratelimitbysize-Query-Cost": {"32"}}, parsed{Cost: 32}},
		{"a cost that is not a count is none", now, mistral("ratelimitbysize-query-cost", "-5"),
			quotas(minute, month)},
	})
}

// Meta's usage headers (https://developers.facebook.com/docs/graph-api/overview/rate-limiting/):
// percentages of a rolling hour's allowance; the largest binds.
func TestParseMetaUsage(t *testing.T) {
	now := ietfNow
	meta := func(remaining float64, name string) Quota { return tok(name, 100, remaining, noReset, time.Hour) }
	buc := `{"66782684":[{"type":"ads_management","call_count":95,"total_cputime":20,"total_time":20,"estimated_time_to_regain_access":0}],` +
		`"10153848260347724":[{"type":"ads_insights","call_count":97,"total_cputime":40,"total_time":41,"estimated_time_to_regain_access":19}]}`
	runHeaderCases(t, []headerCase{
		{"x-app-usage: the documented example", now, http.Header{"X-App-Usage": {`{"call_count": 28, "total_time": 25, "total_cputime": 25}`}},
			quotas(meta(72, "app"))},
		{"x-page-usage far past 100: nothing left", now, http.Header{"X-Page-Usage": {`{"call_count":855,"total_cputime":202,"total_time":911}`}},
			quotas(meta(0, "page"))},
		{"x-business-use-case-usage: the largest of every entry, and the wait to regain access", now,
			http.Header{"X-Business-Use-Case-Usage": {buc}}, parsed{Quotas: []Quota{meta(3, "business-use-case")}, RetryAfter: 19 * time.Minute}},
		{"a Retry-After wins over the wait to regain access", now,
			http.Header{"X-Business-Use-Case-Usage": {buc}, "Retry-After": {"60"}}, parsed{Quotas: []Quota{meta(3, "business-use-case")}, RetryAfter: time.Minute}},
		{"decimals, and values that are not plain numbers skipped", now,
			http.Header{"X-App-Usage": {`{"call_count":"90","total_cputime":-5,"total_time":1e9,"other":99,"x":12.5e1,"call_count ":98, "total_time":12.5}`}},
			quotas(meta(87.5, "app"))},
		{"a number too long for a float64 is over any limit", now,
			http.Header{"X-App-Usage": {`{"call_count":` + strings.Repeat("9", 400) + `}`}}, quotas(meta(0, "app"))},
		{"an object with no percentage states no quota", now, http.Header{"X-App-Usage": {`{}`}}, parsed{}},
		{"not JSON", now, http.Header{"X-App-Usage": {`call_count=13`}}, parsed{}},
		{"an unclosed string", now, http.Header{"X-App-Usage": {`{"call_count":13,"a":"`}}, parsed{}},
		{"longer than the scan bound", now, http.Header{"X-App-Usage": {`{"call_count":13,"pad":"` + strings.Repeat("x", maxUsageLen) + `"}`}}, parsed{}},
		{"deeply nested: found wherever it is, in bounded work", now,
			http.Header{"X-App-Usage": {strings.Repeat("[", 1000) + `{"call_count":40}` + strings.Repeat("]", 1000)}}, quotas(meta(60, "app"))},
	})
}

// Salesforce's Sforce-Limit-Info (https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/headers_api_usage.htm):
// requests used of the org's (and a connected app's) limit, over the
// rolling 24 hours.
func TestParseSalesforce(t *testing.T) {
	now := ietfNow
	const day = 24 * time.Hour
	runHeaderCases(t, []headerCase{
		{"documented example", now, http.Header{"Sforce-Limit-Info": {"api-usage=18/5000"}},
			quotas(q("api-usage", 5000, 4982, noReset, day))},
		{"documented example with a connected app's quota", now,
			http.Header{"Sforce-Limit-Info": {"api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)"}},
			quotas(q("api-usage", 5000, 4975, noReset, day), q("per-app-api-usage", 250, 233, noReset, day))},
		{"documented example past the daily limit, with api-bursts, which counts no requests", now,
			http.Header{"Sforce-Limit-Info": {"api-usage=110018/100000; api-bursts=1/750"}},
			quotas(q("api-usage", 100000, 0, noReset, day))},
		{"an app's name holding separators", now,
			http.Header{"Sforce-Limit-Info": {"per-app-api-usage=1/10(appName=a;b,c), api-usage=2/20"}},
			quotas(q("per-app-api-usage", 10, 9, noReset, day), q("api-usage", 20, 18, noReset, day))},
		{"broken entries are skipped", now,
			http.Header{"Sforce-Limit-Info": {"api-usage; api-usage=5; api-usage=x/9; api-usage=1/0; api-usage=3/4"}},
			quotas(q("api-usage", 4, 1, noReset, day))},
	})
}

// X's app-wide quota beside the endpoint's, in fields of the form of the
// endpoint's (https://docs.x.com/fundamentals/rate-limits).
func TestParseXAppQuota(t *testing.T) {
	reset := time.Unix(1705420800, 0).UTC()
	runHeaderCases(t, []headerCase{
		{"the endpoint's quota, then the app's", xNow, http.Header{
			"X-Rate-Limit-Limit": {"900"}, "X-Rate-Limit-Remaining": {"897"}, "X-Rate-Limit-Reset": {"1705420800"},
			"X-App-Rate-Limit-Limit": {"100000"}, "X-App-Rate-Limit-Remaining": {"99997"}, "X-App-Rate-Limit-Reset": {"1705420800"},
		}, quotas(q("", 900, 897, reset, 0), q("app", 100000, 99997, reset, 0))},
	})
}

// Amazon MWS's hourly request quota, counts as decimals and a reset in RFC
// 3339 (https://docs.developer.amazonservices.com/en_US/dev_guide/DG_Throttling.html);
// MWS sends no Date, and its x-mws-timestamp is the server's clock.
func TestParseAmazonMWS(t *testing.T) {
	now := time.Date(2013, 9, 21, 10, 50, 0, 0, time.UTC)
	mws := http.Header{
		"X-Mws-Quota-Max": {"3600.0"}, "X-Mws-Quota-Remaining": {"10.0"},
		"X-Mws-Quota-Resetson": {"2013-09-21T11:00:00.000Z"}, "X-Mws-Timestamp": {"2013-09-21T10:50:02.120Z"},
	}
	runHeaderCases(t, []headerCase{
		{"documented form", now, mws, quotas(q("hourly", 3600, 10, in(now, 600), time.Hour))},
	})
	t.Run("x-mws-timestamp is handed to the Skew as the Date", func(t *testing.T) {
		skew := &stated{offset: 2 * time.Second}
		got := parseSkewed(mws, now, skew)
		assert.Equal(t, []string{"Sat, 21 Sep 2013 10:50:02 GMT"}, skew.dates)
		require.Len(t, got, 1)
		assert.Equal(t, in(now, 598), got[0].Reset, "the reset, in the server's clock, moved into ours")
	})
	t.Run("a Date wins", func(t *testing.T) {
		skew := &stated{}
		parseSkewed(withFields(mws.Clone(), "Date", "Sat, 21 Sep 2013 10:50:01 GMT"), now, skew)
		assert.Equal(t, []string{"Sat, 21 Sep 2013 10:50:01 GMT"}, skew.dates)
	})
}

// Azure Resource Manager states what is left of each operation's quota,
// and nothing else of it (https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling).
func TestParseAzureResourceManager(t *testing.T) {
	now := ietfNow
	remaining := func(name string, left float64) Quota { return q(name, 0, left, noReset, 0) }
	runHeaderCases(t, []headerCase{
		{"documented reads, in the order of their names", now, http.Header{
			"X-Ms-Ratelimit-Remaining-Subscription-Reads":             {"11999"},
			"X-Ms-Ratelimit-Remaining-Subscription-Resource-Requests": {"249"},
			"X-Ms-Ratelimit-Remaining-Tenant-Reads":                   {"11998"},
			"X-Ms-Ratelimit-Remaining-Resource":                       {"Microsoft.Compute/HighCostGet3Min;159"},
		}, quotas(remaining("subscription-reads", 11999), remaining("subscription-resource-requests", 249), remaining("tenant-reads", 11998))},
		{"the canonical spelling wins", now, http.Header{
			"x-ms-ratelimit-remaining-subscription-writes": {"5"}, "X-Ms-Ratelimit-Remaining-Subscription-Writes": {"1199"},
		}, quotas(remaining("subscription-writes", 1199))},
	})
	t.Run("at most maxQuotas, the first names in order", func(t *testing.T) {
		h := http.Header{}
		for c := 'a'; c <= 'z'; c++ {
			h["X-Ms-Ratelimit-Remaining-"+string(c)] = []string{"1"}
		}
		got, _ := parse(h, now)
		require.Len(t, got.Quotas, maxQuotas)
		assert.Equal(t, "a", got.Quotas[0].Name)
		assert.Equal(t, "p", got.Quotas[maxQuotas-1].Name)
	})
}

// OpenAI's quotas beyond requests and tokens (the project's tokens), and
// Azure OpenAI's renewal periods, the windows of its quotas.
func TestParseOpenAIOtherQuotasAndAzureRenewal(t *testing.T) {
	now := ietfNow
	runHeaderCases(t, []headerCase{
		{"project tokens: a third quota, in tokens", now, http.Header{
			"X-Ratelimit-Limit-Requests": {"30000"}, "X-Ratelimit-Remaining-Requests": {"29999"}, "X-Ratelimit-Reset-Requests": {"2ms"},
			"X-Ratelimit-Limit-Tokens": {"150000000"}, "X-Ratelimit-Remaining-Tokens": {"149995867"}, "X-Ratelimit-Reset-Tokens": {"1ms"},
			"X-Ratelimit-Limit-Project-Tokens": {"150000000"}, "X-Ratelimit-Remaining-Project-Tokens": {"149995870"},
			"X-Ratelimit-Reset-Project-Tokens": {"1ms"},
		}, quotas(q("requests", 30000, 29999, in(now, 0.002), 0), tok("tokens", 150000000, 149995867, in(now, 0.001), 0),
			tok("project-tokens", 150000000, 149995870, in(now, 0.001), 0))},
		{"a *-requests suffix counts requests", now, http.Header{
			"x-ratelimit-limit-project-requests": {"100"}, "x-ratelimit-remaining-project-requests": {"99"},
		}, quotas(q("project-requests", 100, 99, noReset, 0))},
		{"Azure OpenAI's renewal periods are the windows", now, http.Header{
			"X-Ratelimit-Limit-Requests": {"600"}, "X-Ratelimit-Remaining-Requests": {"599"},
			"X-Ratelimit-Limit-Tokens": {"60000"}, "X-Ratelimit-Remaining-Tokens": {"59000"},
			"X-Ratelimit-Renewalperiod-Requests": {"60"}, "X-Ratelimit-Renewalperiod-Tokens": {"60"},
		}, quotas(q("requests", 600, 599, noReset, time.Minute), tok("tokens", 60000, 59000, noReset, time.Minute))},
		{"Azure's -1 sentinel stays unread", now, http.Header{
			"X-Ratelimit-Limit-Tokens": {"-1"}, "X-Ratelimit-Remaining-Tokens": {"-1"}, "X-Ratelimit-Reset-Tokens": {"0"},
		}, parsed{}},
	})
}

// Docker Hub's registry sends the early IETF fields with the window in
// each value (https://docs.docker.com/docker-hub/usage/pulls/), and no
// reset: its window rolls.
func TestParseDockerHub(t *testing.T) {
	runHeaderCases(t, []headerCase{
		{"documented example", ietfNow, http.Header{"Ratelimit-Limit": {"100;w=21600"}, "Ratelimit-Remaining": {"76;w=21600"}},
			quotas(q("", 100, 76, noReset, 6*time.Hour))},
		{"a remaining that is not a count", ietfNow, http.Header{"Ratelimit-Limit": {"100;w=21600"}, "Ratelimit-Remaining": {"-1;w=21600"}},
			quotas(q("", 100, unstated, noReset, 6*time.Hour))},
	})
}

// Hugging Face's Hub labels its policy before naming it, which RFC 9651
// does not allow (https://huggingface.co/docs/hub/rate-limits).
func TestParseHuggingFaceLabelledPolicy(t *testing.T) {
	now := ietfNow
	runHeaderCases(t, []headerCase{
		{"the label is dropped, the policy matched by name", now, http.Header{
			"Ratelimit-Policy": {`"fixed window";"api";q=500;w=300`}, "Ratelimit": {`"api";r=480;t=120`},
		}, quotas(q("api", 500, 480, in(now, 120), 5*time.Minute))},
		{"several labelled members", now, http.Header{
			"Ratelimit-Policy": {`"fixed window";"api";q=500;w=300, "fixed window";"resolvers";q=3000;w=300`},
			"Ratelimit":        {`"api";r=480;t=120`},
		}, quotas(q("api", 500, 480, in(now, 120), 5*time.Minute), q("resolvers", 3000, unstated, noReset, 5*time.Minute))},
		{"a field invalid otherwise stays ignored as a whole", now, http.Header{
			"Ratelimit-Policy": {`"fixed window";"api";q=500;w=300, "x";Q=1`}, "Ratelimit": {`"api";r=480;t=120`},
		}, quotas(q("api", 0, 480, in(now, 120), 0))},
	})
	for _, tc := range []struct{ in, want string }{
		{`"fixed window";"api";q=1`, `"api";q=1`},
		{`"a\"b";"api";q=1, "c";"d"`, `"api";q=1, "d"`},
		{` "l";"n", "m";w=1`, ` "n", "m";w=1`},
	} {
		got, ok := unlabelled(tc.in)
		assert.True(t, ok, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, v := range []string{`"api";q=1`, `"unclosed;"x"`, `api;"x"`} {
		_, ok := unlabelled(v)
		assert.False(t, ok, v)
	}
}

// Jira Data Center's token bucket (Atlassian's Data Center rate limiting:
// https://confluence.atlassian.com/conf87/_ratelimiting_httpheaders-1333822054.html):
// a bucket of X-RateLimit-Limit tokens gaining X-RateLimit-FillRate every
// X-RateLimit-Interval-Seconds; its window is its time to fill from empty.
func TestParseJiraFillRate(t *testing.T) {
	jira := func(fill, interval string) http.Header {
		return http.Header{"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"40"},
			"X-Ratelimit-Fillrate": {fill}, "X-Ratelimit-Interval-Seconds": {interval}}
	}
	runHeaderCases(t, []headerCase{
		{"100 tokens, 10 a second: full in 10 s", ietfNow, jira("10", "1"), quotas(q("", 100, 40, noReset, 10*time.Second))},
		{"5 tokens every 2 s", ietfNow, jira("5", "2"), quotas(q("", 100, 40, noReset, 40*time.Second))},
		{"a zero rate states no window", ietfNow, jira("0", "1"), quotas(q("", 100, 40, noReset, 0))},
		{"a time to fill beyond a year states none", ietfNow, jira("1", "999999"), quotas(q("", 100, 40, noReset, 0))},
		{"an interval that is not a number", ietfNow, jira("10", "1s"), quotas(q("", 100, 40, noReset, 0))},
	})
}

// The new conventions' names are known to classify in any case, and
// others near them are not.
func TestClassifyProviderFields(t *testing.T) {
	for _, name := range []string{
		"x-ratelimit-usage", "x-readratelimit-limit", "x-readratelimit-usage", "x-ratelimit-fillrate",
		"x-ratelimit-interval-seconds", "x-ratelimit-renewalperiod-requests", "x-ratelimit-renewalperiod-tokens",
		"x-ratelimit-limit-project-tokens", "x-ratelimit-reset-batch-requests", "x-app-rate-limit-reset",
		"x-hubspot-ratelimit-interval-milliseconds", "x-ratelimitbysize-remaining-month", "ratelimitbysize-query-cost",
		"sforce-limit-info", "x-app-usage", "x-page-usage", "x-business-use-case-usage", "x-mws-quota-resetson",
		"x-mws-timestamp", "x-ms-ratelimit-remaining-subscription-global-writes",
	} {
		for _, k := range []string{name, http.CanonicalHeaderKey(name), strings.ToUpper(name)} {
			_, ok := classify(k)
			assert.True(t, ok, k)
		}
	}
	for _, name := range []string{
		"x-accepted-oauth-scopes", "x-powered-by", "x-ratelimit-limit-tokens-x", "x-ratelimit-limit--tokens",
		"x-ratelimit-limit-tokens2", "x-ms-ratelimit-remaining-", "x-hubspot-ratelimit-weekly", "x-app-rate-limit-used",
		"sforce-limit", "x-mws-quota", "ratelimitbysize-limit-minute",
	} {
		_, ok := classify(name)
		assert.False(t, ok, name)
	}
}
