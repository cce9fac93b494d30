package pacer

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Quota is one rate-limit policy as a server described it in response headers.
// A response may carry several (a per-second burst and a daily cap, or the
// requests and tokens quotas of an LLM API); the tightest binds.
type Quota struct {
	// Name identifies the quota: "requests", "tokens", "input-tokens",
	// "output-tokens", an IETF policy name, or "" when the server gave none.
	// Names are unique within one Info: a name already taken by an earlier
	// quota gets "#2", "#3"… appended, so each quota can be followed from
	// response to response by its name.
	Name string
	// Limit is the quota per window; 0 if unknown.
	Limit float64
	// Remaining is what is left in the current window, never above Limit
	// when Limit is known; -1 when the server did not say. That is the case
	// when it stated the limit alone (an IETF policy with no RateLimit item
	// for it, a limit field without a remaining one): the quota then
	// describes a policy, Limit per Window, and nothing of the current
	// window, which is neither full nor empty as far as anyone knows. A
	// Remaining that was stated is never negative.
	Remaining float64
	// Reset is the absolute time the window resets (or, for the IETF fields,
	// the time more quota becomes available); zero if unknown. It is computed
	// as now plus an offset, so it carries now's monotonic clock reading; it
	// is never before now and never after now plus [MaxResetHorizon]: a
	// daily or monthly quota's reset is reported as stated, and what to wait
	// for is the limiter's decision (bounded by its MaxDelay).
	Reset time.Time
	// Window is the policy's window length; 0 if unknown. Only a policy
	// parameter (w=, window=) sets it: a reset alone says when the current
	// window ends, not how long windows are.
	Window time.Duration
	// Unit is what the quota counts: requests, unless the server's
	// convention says tokens (OpenAI's and Anthropic's *-tokens fields).
	Unit Unit
}

// Unit is what a [Quota] counts.
type Unit uint8

const (
	// UnitRequests: every request takes one.
	UnitRequests Unit = iota
	// UnitTokens: a request takes its cost, stated with [WithCost] or
	// learnt from the quota's figures (see [Stats.Costs]).
	UnitTokens
)

// String returns "requests" or "tokens".
func (u Unit) String() string {
	if u == UnitTokens {
		return "tokens"
	}
	return "requests"
}

// Info is everything rate-limit related that one response said.
type Info struct {
	// Quotas lists the quotas the response described, in a fixed order: the
	// IETF fields (RateLimit, RateLimit-Policy, RateLimit-Limit…) in field
	// order, then X-RateLimit-* (and X-Rate-Limit-*), then OpenAI's requests
	// and tokens, then Anthropic's requests, tokens, input-tokens and
	// output-tokens, then Shopify's call limit. At most 16 are kept.
	Quotas []Quota
	// RetryAfter is how long the server asked clients to wait, from
	// Retry-After (delta-seconds or HTTP-date), Retry-After-Ms or a provider
	// equivalent; 0 if none. When present it wins over the quotas. It is
	// never negative and never above the parser's cap (DefaultMaxDelay for
	// ParseHeaders). The Transport and Permit.Done also read a 403's or
	// 429's body, and a wait stated only there (the retryDelay of Google's
	// google.rpc.RetryInfo, which Gemini sends) is the RetryAfter of the
	// Info they report when the headers ask for none; ParseHeaders, seeing
	// headers alone, never reports it.
	RetryAfter time.Duration
	// Bucket is a server-named bucket (X-RateLimit-Bucket,
	// X-RateLimit-Resource): endpoints the server puts in one bucket share one
	// limit. "" if none.
	Bucket string
	// Global reports that the limit the response speaks of applies to every
	// endpoint of the server, not to the one requested (Discord's
	// X-RateLimit-Global: true or X-RateLimit-Scope: global, sent on 429s).
	Global bool
}

const (
	// epochFloor is the smallest number taken for an epoch timestamp
	// (2001-09-09 in seconds); smaller numbers are seconds from now.
	epochFloor = 1e9
	// epochSlack is how far from now an absolute reset may lie and still be
	// believed: MaxResetHorizon. Farther ones come from a skewed clock or a
	// misread unit and are ignored rather than guessed at.
	epochSlack = MaxResetHorizon
	// maxWindowSeconds bounds a policy window (w=) to one leap year.
	maxWindowSeconds = 366 * 24 * 3600
	maxQuotas        = 16
	maxNameLen       = 256
	// remainingUnknown is the Remaining of a quota whose server stated its
	// limit but not what is left (see Quota.Remaining).
	remainingUnknown = -1
)

// ParseHeaders reads the rate-limit information in the response headers h,
// received at now (the wall-clock time the response arrived; it may carry a
// monotonic reading, which the resets inherit). ok is false when h holds no
// usable rate-limit field, and Info is then zero.
//
// Header names are matched case-insensitively, so hand-built maps with
// lower-case keys work as well as the canonical keys net/http produces; if a
// field appears under several spellings, the canonical one wins. Fields that
// hold one value use the first line, as [http.Header.Get] does; structured
// fields split over several lines are joined, as RFC 9651 says.
//
// Conventions read: the IETF RateLimit and RateLimit-Policy fields of every
// draft (draft-08+ named policies with q, qu, w, r, t, and the a and w
// proposed in 2026 to replace r and t; the draft-07 dictionary;
// RateLimit-Limit, -Remaining and -Reset with list values such as
// `10, 10;w=1, 50;w=60`); X-RateLimit-* and X-Rate-Limit-* (GitHub, X,
// Reddit, Discord: -Limit, -Remaining, -Reset, -Reset-After, -Used,
// -Resource, -Bucket, -Global, -Scope; Brave: -Policy, and every field a
// comma list read by position, `X-RateLimit-Remaining: 1, 1000` stating
// what is left of the first and the second quota, lists of different
// lengths paired as far as they go); OpenAI's x-ratelimit-*-requests and
// -tokens; anthropic-ratelimit-*; X-Shopify-Shop-Api-Call-Limit;
// Retry-After-Ms, X-Ms-Retry-After-Ms and Retry-After, read in that order.
//
// Rules for what servers get wrong (a value that breaks a rule is ignored, the
// rest of the response still counts):
//   - Numbers are plain decimals (`5000`, `599.0`). Signs, exponents, NaN,
//     Inf and text are ignored; so are structured fields that are not valid
//     RFC 9651, as a whole. IETF policies in units other than requests
//     (qu=content-bytes, concurrent-requests) are not reported.
//   - Remaining above Limit is clamped to Limit. Where only Used and one of
//     Limit or Remaining are given, the other is derived. A limit given
//     with neither Remaining nor Used is a policy: Remaining is -1
//     (unknown), not Limit.
//   - A numeric reset is an epoch in seconds, else an epoch in milliseconds,
//     if it lands within MaxResetHorizon of now; otherwise, if below 1e9, it
//     is seconds from now; otherwise it is ignored, never guessed into a
//     reset years away. Go durations (`6m0s`, `12ms`) are from now; RFC 3339
//     and HTTP dates are absolute and must also land within MaxResetHorizon
//     of now. A reset in the past means the window has already reset: Reset
//     is now. Resets are not clamped to the wait cap: an hourly or daily
//     quota's reset is reported as stated, and the limiter decides what to
//     believe and how long to wait (never past its MaxDelay). Discord's
//     -Reset-After, being relative and immune to clock skew, wins over its
//     -Reset.
//   - Retry-After is delta seconds (decimals accepted) or an HTTP-date in any
//     of RFC 9110's three forms; a date in the past means 0. Waits beyond the
//     cap, absurdly long digit strings included, are clamped to it.
//   - At most 16 quotas are kept; names and buckets longer than 256 bytes,
//     and buckets with spaces or control characters, are ignored.
//
// ParseHeaders never panics and does not modify h. A typical response costs
// one allocation, for the Quotas slice.
func ParseHeaders(h http.Header, now time.Time) (Info, bool) {
	return parseHeaders(h, now, DefaultMaxDelay)
}

// parseHeaders is ParseHeaders with the cap maxDelay (the Transport's
// configured one) in place of DefaultMaxDelay; maxDelay ≤ 0 means
// DefaultMaxDelay.
func parseHeaders(h http.Header, now time.Time, maxDelay time.Duration) (Info, bool) {
	return parseHeadersSkewed(h, now, maxDelay, 0)
}

// parseHeadersSkewed is parseHeaders for a server whose clock is offset
// ahead of ours (negative: behind; see clockOffset): absolute resets (epoch
// seconds, dates) are moved into our clock; relative ones need nothing.
func parseHeadersSkewed(h http.Header, now time.Time, maxDelay, offset time.Duration) (Info, bool) {
	var qs quotaBuf
	info, ok := parseHeadersInto(h, now, maxDelay, offset, &qs)
	if qs.n > 0 {
		info.Quotas = slices.Clone(qs.slice())
	}
	return info, ok
}

// quotaBuf holds the quotas of one response without a heap allocation for
// the usual few (a GitHub-style response states one; IETF and OpenAI
// responses two). The Transport parses into one held by the attempt and
// hands the quotas to the limiter apart from the rest of the Info, which
// copies what it keeps (Adaptive.lastQuotas): in CPU profiles of a
// GitHub-style response through the Transport, allocating and copying the
// Quotas slice was 15% of the parse, before the garbage it left. (Apart,
// because Go's escape analysis follows a struct as a whole: riding in an
// Info that the limiter keeps, the buffer would go to the heap with it.)
type quotaBuf struct {
	n      int
	inline [2]Quota
	more   []Quota // all of them when more than fit inline
}

// slice returns the quotas held; it aliases b.
func (b *quotaBuf) slice() []Quota {
	if b.more != nil {
		return b.more
	}
	return b.inline[:b.n]
}

// parseHeadersInto is parseHeadersSkewed with the quotas put in qs rather
// than in Info.Quotas, which it leaves nil.
func parseHeadersInto(h http.Header, now time.Time, maxDelay, offset time.Duration, qs *quotaBuf) (Info, bool) {
	// One pass over the keys finds every rate-limit field, so the cost does
	// not grow with the number of conventions known. The loop lives here,
	// not in a method, so its writes go to a known stack variable and need
	// no GC write barriers.
	var fs fieldSet
	var present, dup uint64 // bit f: field f was found; under several spellings
	for k, vs := range h {
		f, ok := classify(k)
		if !ok || len(vs) == 0 {
			continue
		}
		if present&(1<<f) != 0 {
			dup |= 1 << f
			continue
		}
		fs.vals[f] = vs
		present |= 1 << f
	}
	if present == 0 {
		return Info{}, false
	}
	if dup != 0 {
		fs.prefer(h, dup)
	}
	maxDelay = delayCap(maxDelay)
	// Field by field: in CPU profiles the composite literal of this 1 KB
	// struct cost twice as much as clearing it and setting its fields.
	var p headerParser
	p.now, p.resetCap, p.slack, p.offset = now, max(MaxResetHorizon, maxDelay), max(epochSlack, maxDelay), offset
	var info Info
	for _, f := range [...]field{fRetryAfterMs, fMsRetryAfterMs, fRetryAfter} {
		if v := fs.first(f); v != "" {
			if f == fRetryAfter {
				info.RetryAfter, p.found = parseRetryAfter(v, now, maxDelay)
			} else if ms, ok := parseDecimal(v); ok {
				info.RetryAfter, p.found = clampSeconds(ms/1000, maxDelay), true
			}
			if p.found {
				break
			}
		}
	}
	p.ietf(&fs)
	p.xRateLimit(&fs)
	// The conventions a response does not use are skipped by their bits:
	// most responses speak one.
	for i, name := range [...]string{"requests", "tokens"} {
		if f := fOpenAI + field(3*i); present&(7<<f) != 0 {
			p.counts(name, fs.first(f), fs.first(f+1), fs.first(f+2))
		}
	}
	for i, name := range [...]string{"requests", "tokens", "input-tokens", "output-tokens"} {
		if f := fAnthropic + field(3*i); present&(7<<f) != 0 {
			p.counts(name, fs.first(f), fs.first(f+1), fs.first(f+2))
		}
	}
	if present&(1<<fShopify) != 0 {
		p.shopify(fs.first(fShopify))
	}
	for _, f := range [...]field{fXBucket, fXResource} {
		if b := trimOWS(fs.first(f)); validBucket(b) {
			info.Bucket, p.found = b, true
			break
		}
	}
	if g := trimOWS(fs.first(fXGlobal)); strings.EqualFold(g, "true") || g == "1" ||
		strings.EqualFold(trimOWS(fs.first(fXScope)), "global") {
		info.Global, p.found = true, true
	}
	qs.n, qs.more = p.n, nil
	if p.n > len(qs.inline) {
		qs.more = make([]Quota, p.n)
		copy(qs.more[copy(qs.more, p.room[:]):], p.more)
	} else {
		copy(qs.inline[:], p.room[:p.n])
	}
	uniqueNames(qs.slice())
	return info, p.found
}

// uniqueNames appends "#2", "#3"… to a name already used by an earlier quota,
// so that a consumer can follow each quota from response to response by name
// (an unnamed policy beside an unnamed current quota, or a server sending both
// the IETF and the X-RateLimit fields).
func uniqueNames(qs []Quota) {
	taken := func(n int, name string) bool {
		for _, q := range qs[:n] {
			if q.Name == name {
				return true
			}
		}
		return false
	}
	for i := 1; i < len(qs); i++ {
		base := qs[i].Name
		for k := 2; taken(i, qs[i].Name); k++ {
			qs[i].Name = base + "#" + strconv.Itoa(k)
		}
	}
}

// parseRetryAfter parses a Retry-After value received at now: delta seconds
// (`120`, also the decimal `2.0` some servers send) or an HTTP-date in any of
// RFC 9110's three forms. A date in the past yields 0; waits beyond maxDelay
// are clamped to it. ok is false for anything else, such as negative numbers
// or garbage. [ParseHeaders] is its public face: Info.RetryAfter, which also
// reads Retry-After-Ms and the providers' equivalents.
func parseRetryAfter(v string, now time.Time, maxDelay time.Duration) (time.Duration, bool) {
	v = trimOWS(v)
	if s, ok := parseDecimal(v); ok {
		return clampSeconds(s, maxDelay), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxDelay), true
}

// headerParser accumulates the quotas of one response.
type headerParser struct {
	now      time.Time
	resetCap time.Duration // the farthest reset reported: MaxResetHorizon, or the wait cap if longer
	offset   time.Duration // the server's clock minus ours, for absolute resets
	slack    time.Duration
	// The quotas found, at most maxQuotas: the usual few in room, the
	// rest in more. (A [maxQuotas]Quota cleared 1 KB per response.)
	room  [len(quotaBuf{}.inline)]Quota
	more  []Quota
	n     int
	found bool
}

// quotaState is a quota being assembled from separate fields.
type quotaState struct {
	name                   string
	unit                   Unit
	limit, remaining       float64
	hasLimit, hasRemaining bool
	reset                  time.Time
	window                 time.Duration
}

// emit records q if the server gave its limit or its remaining count; a reset
// alone says nothing a limiter can use.
func (p *headerParser) emit(q quotaState) {
	if !q.hasLimit && !q.hasRemaining {
		return
	}
	p.found = true
	if p.n == maxQuotas {
		return
	}
	out := Quota{Name: q.name, Reset: q.reset, Window: q.window, Unit: q.unit}
	if q.hasLimit {
		out.Limit = q.limit
	}
	switch {
	case !q.hasRemaining:
		out.Remaining = remainingUnknown
	case q.hasLimit && q.remaining > q.limit:
		out.Remaining = q.limit
	default:
		out.Remaining = q.remaining
	}
	if p.n < len(p.room) {
		p.room[p.n] = out
	} else {
		p.more = append(p.more, out)
	}
	p.n++
}

// counts handles the limit/remaining/reset triples of OpenAI and Anthropic.
func (p *headerParser) counts(name, limit, remaining, reset string) {
	if limit == "" && remaining == "" {
		return
	}
	q := quotaState{name: name}
	if name != "requests" {
		q.unit = UnitTokens
	}
	q.limit, q.hasLimit = parseCount(limit)
	q.remaining, q.hasRemaining = parseCount(remaining)
	q.reset, _ = p.reset(reset)
	p.emit(q)
}

// xRateLimit handles X-RateLimit-* and X-Rate-Limit-*. The limit may be a
// list (`100, 100;window=60, 10000;window=86400`) as in the older IETF
// drafts; or every field may be a list read by position, as Brave sends
// them (xRateLimitLists).
func (p *headerParser) xRateLimit(fs *fieldSet) {
	if fs.vals[fXLimit] == nil && fs.vals[fXRemaining] == nil && fs.vals[fXUsed] == nil && fs.vals[fXPolicy] == nil {
		return
	}
	if isXList(fs) {
		p.xRateLimitLists(fs)
		return
	}
	// Only a list needs room for its policies (776 bytes to clear): the
	// usual plain number goes without.
	// (Several lines are joined into a list by limitField.)
	if vs := fs.vals[fXLimit]; len(vs) > 1 || len(vs) == 1 && !isCount(vs[0]) {
		var ps policies
		p.xRateLimitWith(fs, &ps)
		return
	}
	p.xRateLimitWith(fs, nil)
}

// xRateLimitWith is xRateLimit; ps holds the policies of a list limit, nil
// when the limit is a plain number or absent.
func (p *headerParser) xRateLimitWith(fs *fieldSet, ps *policies) {
	var q quotaState
	p.limitField(fs, fXLimit, &q, ps)
	q.remaining, q.hasRemaining = parseCount(fs.first(fXRemaining))
	if used, ok := parseCount(fs.first(fXUsed)); ok {
		switch {
		case !q.hasLimit && q.hasRemaining:
			q.limit, q.hasLimit = q.remaining+used, true
		case q.hasLimit && !q.hasRemaining:
			q.remaining, q.hasRemaining = max(q.limit-used, 0), true
		}
	}
	var ok bool
	if s, isNum := parseDecimal(fs.first(fXResetAfter)); isNum {
		q.reset, ok = p.after(s), true
	}
	if !ok {
		q.reset, _ = p.reset(fs.first(fXReset))
	}
	p.combine(q, ps)
}

// shopify handles `X-Shopify-Shop-Api-Call-Limit: 32/40` (used/limit).
func (p *headerParser) shopify(v string) {
	used, limit, ok := strings.Cut(v, "/")
	if !ok {
		return
	}
	q := quotaState{}
	u, okU := parseCount(used)
	q.limit, q.hasLimit = parseCount(limit)
	// A bucket of size 0 is broken, not a quota that forbids every request.
	if okU && q.hasLimit && q.limit > 0 {
		q.remaining, q.hasRemaining = max(q.limit-u, 0), true
		p.emit(q)
	}
}

// reset parses a reset that is not a structured field: a number (see
// resetNumber), a Go duration from now, or an absolute date.
func (p *headerParser) reset(v string) (time.Time, bool) {
	v = trimOWS(v)
	if v == "" {
		return time.Time{}, false
	}
	if s, ok := parseDecimal(v); ok {
		return p.resetNumber(s)
	}
	if s, ok := parseDuration(v); ok {
		return p.after(s), true
	}
	if t, ok := parseDate(v); ok {
		return p.at(t)
	}
	return time.Time{}, false
}

// resetNumber interprets a numeric reset by magnitude against now: an epoch
// in seconds, else in milliseconds, if within p.slack of now; else, below
// epochFloor, seconds from now; else nothing.
func (p *headerParser) resetNumber(v float64) (time.Time, bool) {
	if !(v >= 0) || math.IsInf(v, 0) {
		return time.Time{}, false
	}
	// In the server's clock: its epoch is compared with its now.
	serverNow := p.now.Add(p.offset)
	nowSec := float64(serverNow.Unix()) + float64(serverNow.Nanosecond())/1e9
	slack := p.slack.Seconds()
	for _, epoch := range [...]float64{v, v / 1000} {
		if d := epoch - nowSec; d >= -slack && d <= slack {
			// Microseconds are as fine as any server's clock.
			return p.now.Add(min(clampSeconds(d, p.resetCap).Round(time.Microsecond), p.resetCap)), true
		}
	}
	if v < epochFloor {
		return p.after(v), true
	}
	return time.Time{}, false
}

// after returns now plus s seconds, clamped to [now, now+resetCap].
func (p *headerParser) after(s float64) time.Time {
	return p.now.Add(clampSeconds(s, p.resetCap))
}

// at converts an absolute reset: believed within p.slack of now, a past one
// meaning now, a later one clamped to now+resetCap.
func (p *headerParser) at(t time.Time) (time.Time, bool) {
	d := t.Sub(p.now) - p.offset
	if d < -p.slack || d > p.slack {
		return time.Time{}, false
	}
	return p.now.Add(min(max(d, 0), p.resetCap)), true
}
