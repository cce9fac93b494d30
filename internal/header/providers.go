package header

import (
	"net/http"
	"strings"
	"time"
)

// The conventions of one provider each, whose fields are not stored in the
// pass over the keys (numStored): Parse looks their values up in a second
// pass (rareSet), only for a response that has one, and reads them after
// the common conventions, in this file's order.

// rareSet holds the values of the fields that are not stored ones, found
// in a second pass over a response's keys.
type rareSet struct {
	vals [numFields - numStored][]string
}

// collect sets rs from h: the value of each field of the bit set rare, a
// field under several spellings taking the preferred one's (preferKey), as
// stored fields do.
func (rs *rareSet) collect(h map[string][]string, rare uint64) {
	var keys [numFields - numStored]string
	for k, vs := range h {
		f, ok := classify(k)
		if !ok || f < numStored || len(vs) == 0 || rare&rareBit(f) == 0 {
			continue
		}
		if i := f - numStored; keys[i] == "" || preferKey(k, keys[i]) {
			keys[i], rs.vals[i] = k, vs
		}
	}
}

// first returns the first line of f, as http.Header.Get does.
func (rs *rareSet) first(f field) string {
	if vs := rs.vals[f-numStored]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// has reports whether the response has field f.
func (rs *rareSet) has(f field) bool { return rs.vals[f-numStored] != nil }

// rare reads the fields of the bit set rare: Strava's, X's app quota,
// OpenAI's other quotas, HubSpot's, Mistral's, Meta's, Salesforce's,
// Amazon MWS's and Azure Resource Manager's, in that order. noDate tells
// that the response has no Date, which an MWS response replaces with its
// x-mws-timestamp.
func (p *parser) rare(h http.Header, rare uint64, fs *fieldSet, noDate bool, skew Skew, info *Info, out *Quotas) {
	var rs rareSet
	rs.collect(h, rare)
	if noDate && skew != nil && rs.has(fMWS+3) {
		if date, ok := mwsDate(rs.first(fMWS + 3)); ok {
			skew.Observe(date, p.now)
			p.offset = skew.Offset(p.now)
		}
	}
	if rare&rareBits(fXUsage, 3) != 0 {
		p.strava(fs, &rs, out)
	}
	if rare&rareBits(fXApp, 3) != 0 {
		// X's app-wide quota, beside the endpoint's x-rate-limit-*
		// (https://docs.x.com/fundamentals/rate-limits documents those;
		// the app's fields, of the same form, it no longer does).
		p.counts("app", Requests, rs.first(fXApp), rs.first(fXApp+1), rs.first(fXApp+2), 0, out)
	}
	if rare&rareBit(fXSuffixed) != 0 {
		p.suffixed(h, out)
	}
	if rare&rareBits(fHubSpot, 7) != 0 {
		p.hubSpot(&rs, out)
	}
	if rare&rareBits(fMistral, 8) != 0 {
		p.mistral(&rs, info, out)
	}
	if rare&rareBits(fMeta, 3) != 0 {
		p.meta(&rs, info, out)
	}
	if rare&rareBit(fSforce) != 0 {
		p.salesforce(strings.Join(rs.vals[fSforce-numStored], ", "), out)
	}
	if rare&rareBits(fMWS, 3) != 0 {
		p.mws(&rs, out)
	}
	if rare&rareBit(fARM) != 0 {
		p.arm(h, out)
	}
}

// mwsDate is Amazon MWS's x-mws-timestamp (RFC 3339, the server's clock:
// MWS sends no Date) as an HTTP-date, for the Skew.
func mwsDate(v string) (string, bool) {
	t, ok := parseDate(trimOWS(v))
	if !ok {
		return "", false
	}
	return t.UTC().Format(http.TimeFormat), true
}

// Strava states two quotas in pairs, `X-RateLimit-Limit: 200,2000` and
// `X-RateLimit-Usage: 70,303`: a 15-minute and a daily limit and the
// requests used of each (used, not what is left), and the same pairs of its
// read ("non-upload") limit in X-ReadRateLimit-Limit and -Usage. The
// 15-minute windows end at natural quarter hours (0, 15, 30 and 45 minutes
// after the hour), the daily one at midnight UTC
// (https://developers.strava.com/docs/rate-limits). A response that has
// X-RateLimit-Usage is read so, and its X-RateLimit fields by no other
// rule; one that does not is not Strava's, and its comma lists are read as
// the IETF drafts' or Brave's (lists.go).
var stravaQuotas = [2]struct {
	names  [2]string
	window [2]time.Duration
}{
	{[2]string{"15min", "daily"}, [2]time.Duration{15 * time.Minute, 24 * time.Hour}},
	{[2]string{"read-15min", "read-daily"}, [2]time.Duration{15 * time.Minute, 24 * time.Hour}},
}

// strava reads Strava's quotas: 15min, daily, read-15min and read-daily.
func (p *parser) strava(fs *fieldSet, rs *rareSet, out *Quotas) {
	if rs.has(fXUsage) {
		p.stravaPairs(0, fs.first(fXLimit), rs.first(fXUsage), out)
	}
	if rs.has(fXRead) || rs.has(fXRead+1) {
		p.stravaPairs(1, rs.first(fXRead), rs.first(fXRead+1), out)
	}
}

// stravaPairs reads the pairs limits and usages of the family stravaQuotas[fam].
// A member that is not a number (`X-ReadRateLimit-Usage: ,` on an endpoint
// the read limit does not count) leaves its figure unknown: a limit without
// a usage is a quota with nothing known of what is left.
func (p *parser) stravaPairs(fam int, limits, usages string, out *Quotas) {
	for i := range 2 {
		var limit, used string
		limit, limits, _ = strings.Cut(limits, ",")
		used, usages, _ = strings.Cut(usages, ",")
		q := quotaState{name: stravaQuotas[fam].names[i], window: stravaQuotas[fam].window[i]}
		q.limit, q.hasLimit = parseCount(limit)
		if u, ok := parseCount(used); ok && q.hasLimit {
			q.remaining, q.hasRemaining = max(q.limit-u, 0), true
		}
		q.reset = p.nextBoundary(q.window)
		p.emit(&q, out)
	}
}

// nextBoundary is when the server's clock next reaches a multiple of
// period since midnight UTC (a quarter hour, a day), in our clock.
func (p *parser) nextBoundary(period time.Duration) time.Time {
	server := p.now.Add(p.offset)
	next := server.Truncate(period).Add(period)
	return p.after(next.Sub(server).Seconds())
}

// suffixed reads OpenAI's quotas beyond requests and tokens, such as
// x-ratelimit-limit-project-tokens: a quota per NAME of the fields
// x-ratelimit-{limit,remaining,reset}-NAME (or x-rate-limit-) whose NAME
// ends in -tokens (counting tokens) or -requests (counting requests). The
// quotas come in the order of their names, at most maxQuotas of them (the
// first names in that order).
func (p *parser) suffixed(h http.Header, out *Quotas) {
	var ts byName
	for k, vs := range h {
		rest, ok := cutPrefixFold(k, "x-ratelimit-")
		if !ok {
			rest, ok = cutPrefixFold(k, "x-rate-limit-")
		}
		if !ok || len(vs) == 0 || len(k) > maxFieldName {
			continue
		}
		part, name, ok := suffixedPart(rest)
		if !ok {
			continue
		}
		ts.read(strings.ToLower(name), part, k, vs[0])
	}
	for _, t := range ts.all() {
		unit := Tokens
		if strings.HasSuffix(t.name, "-requests") {
			unit = Requests
		}
		p.counts(t.name, unit, t.vals[0], t.vals[1], t.vals[2], 0, out)
	}
}

// suffixedPart reads rest, the part of an x-ratelimit- name after the
// prefix, in any case, as one of OpenAI's other quotas: part 0, 1 or 2 for
// limit-, remaining- or reset-, and name, a NAME ending in -tokens or
// -requests (so "tokens" and "requests" themselves are not).
func suffixedPart(rest string) (part int, name string, ok bool) {
	for i, pre := range [...]string{"limit-", "remaining-", "reset-"} {
		if name, ok := cutPrefixFold(rest, pre); ok {
			for _, suf := range [...]string{"-tokens", "-requests"} {
				if len(name) > len(suf) && strings.EqualFold(name[len(name)-len(suf):], suf) {
					return i, name, true
				}
			}
			return 0, "", false
		}
	}
	return 0, "", false
}

// hubSpot reads HubSpot's quotas (https://developers.hubspot.com/docs/api/usage-details):
// a request authenticated with an API key states the daily one
// (X-HubSpot-RateLimit-Daily, -Daily-Remaining) and the per-second one
// (-Secondly, -Secondly-Remaining); one authenticated with OAuth or a
// private app's token states the quota of its interval (-Max, -Remaining,
// -Interval-Milliseconds), named "interval". None states a reset: the
// daily quota resets at midnight in the account's time zone, which no
// header tells, and the others are rolling.
func (p *parser) hubSpot(rs *rareSet, out *Quotas) {
	p.counts("daily", Requests, rs.first(fHubSpot), rs.first(fHubSpot+1), "", 24*time.Hour, out)
	p.counts("secondly", Requests, rs.first(fHubSpot+2), rs.first(fHubSpot+3), "", time.Second, out)
	var interval time.Duration
	if ms, ok := parseCount(rs.first(fHubSpot + 6)); ok {
		interval = windowOf(ms / 1000)
	}
	p.counts("interval", Requests, rs.first(fHubSpot+4), rs.first(fHubSpot+5), "", interval, out)
}

// mistral reads Mistral's token quotas: tokens-minute
// (x-ratelimitbysize-limit-minute, -remaining-minute, over a minute that
// ends in ratelimitbysize-reset seconds) and tokens-month
// (x-ratelimitbysize-limit-month, -remaining-month; no reset is stated, and
// a calendar month has no one length, so neither is its window). The
// unprefixed ratelimitbysize-limit and -remaining repeat the minute's
// figures and are read only in their absence; ratelimitbysize-query-cost
// is the request's Cost. Mistral documents none of these; the reading is
// of the figures its API sends.
func (p *parser) mistral(rs *rareSet, info *Info, out *Quotas) {
	limit, remaining := rs.first(fMistral), rs.first(fMistral+1)
	if !rs.has(fMistral) && !rs.has(fMistral+1) {
		limit, remaining = rs.first(fMistral+4), rs.first(fMistral+5)
	}
	p.counts("tokens-minute", Tokens, limit, remaining, rs.first(fMistral+6), time.Minute, out)
	p.counts("tokens-month", Tokens, rs.first(fMistral+2), rs.first(fMistral+3), "", 0, out)
	if c, ok := parseCount(rs.first(fMistral + 7)); ok {
		info.Cost, p.found = c, true
	}
}

// Meta's Graph API states how much of a rolling hour's allowance an app, a
// Page or a business use case has used, in percentages in a JSON header
// (https://developers.facebook.com/docs/graph-api/overview/rate-limiting/):
// `x-app-usage: {"call_count":13,"total_cputime":0,"total_time":2}`, the
// same in x-page-usage, and in x-business-use-case-usage a list of them per
// business id, each with the minutes until a throttled caller may call
// again (estimated_time_to_regain_access). The call is throttled once any
// percentage reaches 100, and they may go far beyond it.
var metaQuotas = [3]string{"app", "page", "business-use-case"}

// meta reads a quota per header: a limit of 100 of a unit a call takes an
// unknown share of (Tokens: the limiter learns the cost), what is left of
// it 100 less the largest percentage (never below 0), over an hour; and a
// wait, the largest estimated_time_to_regain_access, when no Retry-After
// asks for one. A header that is not such JSON is ignored.
func (p *parser) meta(rs *rareSet, info *Info, out *Quotas) {
	for i, name := range metaQuotas {
		v := rs.first(fMeta + field(i))
		if v == "" {
			continue
		}
		u, ok := scanUsage(v)
		if !ok {
			continue
		}
		if u.hasPercent {
			q := quotaState{name: name, unit: Tokens, window: time.Hour, limit: 100, hasLimit: true, hasRemaining: true}
			q.remaining = max(100-u.percent, 0)
			p.emit(&q, out)
		}
		if u.regainMinutes > 0 && info.RetryAfter == 0 {
			info.RetryAfter, p.found = ClampSeconds(u.regainMinutes*60, p.wait), true
		}
	}
}

// salesforce reads Sforce-Limit-Info (https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/headers_api_usage.htm):
// `api-usage=27067/32000`, the API requests the org used of its limit,
// and with it (`;`- or `,`-separated) `per-app-api-usage=17/250(appName=…)`,
// the connected app's. Each is a quota named by its key, over the rolling
// 24 hours Salesforce counts API requests in. Other entries (api-bursts,
// hours past the daily limit of a monthly allowance) count no requests and
// are not read.
func (p *parser) salesforce(v string, out *Quotas) {
	for v != "" {
		var entry string
		entry, v = cutEntry(v)
		key, figures, ok := strings.Cut(entry, "=")
		key = trimOWS(key)
		var name string
		switch {
		case !ok:
			continue
		case strings.EqualFold(key, "api-usage"):
			name = "api-usage"
		case strings.EqualFold(key, "per-app-api-usage"):
			name = "per-app-api-usage"
		default:
			continue
		}
		figures, _, _ = strings.Cut(figures, "(")
		used, limit, ok := strings.Cut(figures, "/")
		u, okU := parseCount(used)
		q := quotaState{name: name, window: 24 * time.Hour}
		q.limit, q.hasLimit = parseCount(limit)
		if ok && okU && q.hasLimit && q.limit > 0 {
			q.remaining, q.hasRemaining = max(q.limit-u, 0), true
			p.emit(&q, out)
		}
	}
}

// cutEntry cuts v at its first ';' or ',' outside parentheses (an app's
// name, in them, may hold either).
func cutEntry(v string) (entry, rest string) {
	depth := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ';', ',':
			if depth == 0 {
				return v[:i], v[i+1:]
			}
		}
	}
	return v, ""
}

// mws reads Amazon MWS's hourly request quota (x-mws-quota-max,
// x-mws-quota-remaining, counts written as decimals, `60.0`; and
// x-mws-quota-resetsOn, an RFC 3339 date in the server's clock), named
// "hourly" (the MWS Developer Guide's "Throttling: Limits to how often you
// can submit requests", https://docs.developer.amazonservices.com/en_US/dev_guide/DG_Throttling.html).
func (p *parser) mws(rs *rareSet, out *Quotas) {
	p.counts("hourly", Requests, rs.first(fMWS), rs.first(fMWS+1), rs.first(fMWS+2), time.Hour, out)
}

// arm reads Azure Resource Manager's x-ms-ratelimit-remaining-SCOPE-OPERATION
// fields (subscription-reads, subscription-writes, tenant-reads…: what is
// left of the operation's quota at the instance that answered,
// https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling):
// a quota per field, named SCOPE-OPERATION in lower case, with Remaining
// alone (the limit and reset are not stated). A value that is not a plain
// number (x-ms-ratelimit-remaining-resource lists a resource provider's
// policies) is not read. The quotas come in the order of their names, at
// most maxQuotas of them.
func (p *parser) arm(h http.Header, out *Quotas) {
	var rs byName
	for k, vs := range h {
		rest, ok := cutPrefixFold(k, "x-ms-ratelimit-remaining-")
		if !ok || rest == "" || len(rest) > maxNameLen || len(vs) == 0 {
			continue
		}
		rs.read(strings.ToLower(rest), 1, k, vs[0])
	}
	for _, r := range rs.all() {
		q := quotaState{name: r.name}
		q.remaining, q.hasRemaining = parseCount(r.vals[1])
		p.emit(&q, out)
	}
}

// byName gathers the fields of quotas named in their fields' names (OpenAI's
// other quotas, ARM's): the first maxQuotas names met, in the order of the
// names, each with its limit, remaining and reset (parts 0, 1, 2).
type byName struct {
	ts [maxQuotas]namedFields
	n  int
}

type namedFields struct {
	name string
	keys [3]string // the spelling each part was read from
	vals [3]string
}

// read keeps v, read from field k, as part of the quota named name; a field
// present under several spellings keeps the preferred one's (preferKey).
func (b *byName) read(name string, part int, k, v string) {
	i := 0
	for i < b.n && b.ts[i].name < name {
		i++
	}
	if i == b.n || b.ts[i].name != name {
		if i == len(b.ts) {
			return // past the first maxQuotas names
		}
		copy(b.ts[i+1:], b.ts[i:min(b.n, len(b.ts)-1)])
		b.ts[i], b.n = namedFields{name: name}, min(b.n+1, len(b.ts))
	}
	if t := &b.ts[i]; t.keys[part] == "" || preferKey(k, t.keys[part]) {
		t.keys[part], t.vals[part] = k, v
	}
}

func (b *byName) all() []namedFields { return b.ts[:b.n] }
