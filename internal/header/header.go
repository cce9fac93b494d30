package header

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pacer-go/pacer/internal/header/sfv"
)

// The grammar's one pass is in this one file, in the order Parse meets it:
// the quotas and what a response states of them, the readers of each
// convention, the fields found among the headers, the IETF fields and the
// values' grammar: a response's headers are read by all of them at once.
// Brave's lists, read by position, are apart (lists.go), as is RFC 9651's
// syntax (sfv).

// Quota is one quota a response states. pacer.Quota has the same fields,
// documented for its users, and is converted from it field by field.
type Quota struct {
	// Name identifies the quota, unique within one response (see the
	// package doc); "" when the server named none.
	Name string
	// Limit is the quota per window; 0 if unknown.
	Limit float64
	// Remaining is what is left of the current window, never above Limit
	// when Limit is known; -1 when the server stated the limit alone.
	Remaining float64
	// Reset is when the window resets (for the IETF fields: when more
	// quota is available), never before now nor after now plus the reset
	// cap; zero if unknown.
	Reset time.Time
	// Window is the policy's window length, stated or documented for the
	// field (see the package doc); 0 if unknown. With no Reset, it is a
	// rolling window or a token bucket's time to fill from empty.
	Window time.Duration
	// Unit is what the quota counts.
	Unit Unit
}

// Unit is what a Quota counts.
type Unit uint8

const (
	// Requests: every request takes one.
	Requests Unit = iota
	// Tokens: a request takes its cost (OpenAI's, Anthropic's and
	// Mistral's token quotas; Meta's usage percentages, of which a call
	// takes an unknown share).
	Tokens
)

// Info is what a response's fields state besides its quotas.
type Info struct {
	// RetryAfter is the wait the server asked for, in [0, Caps.Wait]; 0
	// if none.
	RetryAfter time.Duration
	// Bucket is a server-named bucket (X-RateLimit-Bucket, -Resource); ""
	// if none.
	Bucket string
	// Global reports a limit that applies to every endpoint of the server
	// (Discord's X-RateLimit-Global: true, X-RateLimit-Scope: global).
	Global bool
	// Cost is what the server charged the request against its quotas up
	// front, in the quotas' unit; 0 when it did not say. Mistral states
	// it (ratelimitbysize-query-cost: the prompt's tokens and the
	// completion's max_tokens reserved, not the tokens used).
	Cost float64
}

// Caps bounds what a parse believes.
type Caps struct {
	// Wait is the longest wait believed: a Retry-After beyond it is
	// clamped to it. It must be positive.
	Wait time.Duration
	// Reset is the farthest reset reported: a relative reset beyond it is
	// clamped to it, an absolute one beyond it ignored. Wait widens it
	// when longer.
	Reset time.Duration
}

// The default caps, pacer's DefaultMaxDelay and MaxResetHorizon (their docs
// give the reasons): a wrong or hostile wait holds a client an hour at
// most, and a monthly quota's reset (a month and a day away) is read as
// stated. Package retry's DefaultCheck believes as much of a response it
// reads itself.
const (
	DefaultWait  = time.Hour
	ResetHorizon = 32 * 24 * time.Hour
)

const (
	maxQuotas = 16 // kept of one response
	// epochFloor is the smallest number taken for an epoch timestamp
	// (2001-09-09 in seconds); smaller numbers are seconds from now.
	epochFloor = 1e9
	// maxWindowSeconds bounds a policy window (w=) to one leap year.
	maxWindowSeconds = 366 * 24 * 3600
	maxNameLen       = 256
	// maxFieldName is the longest field name classify reads, bar Azure
	// Resource Manager's (see arm): the longest name it knows, so that a
	// name is lowered into a small buffer on the stack.
	maxFieldName = len("anthropic-ratelimit-output-tokens-remaining")
	// remainingUnknown is the Remaining of a quota whose server stated its
	// limit but not what is left (see Quota.Remaining).
	remainingUnknown = -1
)

// Quotas holds the quotas of one response, the usual few (a GitHub-style
// response states one; IETF and OpenAI responses two) without a heap
// allocation. Parse empties it first.
type Quotas struct {
	n    int
	room [2]Quota
	more []Quota // the quotas after the first len(room)
}

// Len is how many quotas qs holds.
func (qs *Quotas) Len() int { return qs.n }

// At returns quota i, 0 ≤ i < Len(), in the order of the package doc: qs's
// own, valid until the next Parse into qs. (By pointer: the caller converts
// it field by field, and a copy stored word by word and read whole stalled
// on store forwarding.)
func (qs *Quotas) At(i int) *Quota { return qs.at(i) }

func (qs *Quotas) at(i int) *Quota {
	if i < len(qs.room) {
		return &qs.room[i]
	}
	return &qs.more[i-len(qs.room)]
}

// Skew bounds how far a server's clock is ahead of ours (negative: behind),
// so that Parse reads the absolute resets it states in our clock. Parse
// hands it the response's Date (found in its one pass over the fields,
// sparing the caller a lookup of its own), whether or not the response
// states a rate limit, and asks for the offset once it has found one. A
// response with no Date but Amazon MWS's x-mws-timestamp, the server's
// clock in RFC 3339, has that timestamp handed over instead, as an
// HTTP-date.
type Skew interface {
	// Observe folds in the Date of a response received at recv; never
	// called with "".
	Observe(date string, recv time.Time)
	// Offset is the server's clock less ours at now.
	Offset(now time.Time) time.Duration
}

// Parse reads the rate-limit fields of h, a response received at now (its
// resets inherit now's monotonic reading), from a server whose clock skew
// bounds (nil: the server's clock is ours; absolute resets are moved into
// our clock, relative ones need nothing). The quotas go to out, the rest
// to Info. ok is false when h holds no usable rate-limit field; Info is then
// zero. Parse never panics and does not modify h.
func Parse(h http.Header, now time.Time, caps Caps, skew Skew, out *Quotas) (Info, bool) {
	out.n, out.more = 0, nil
	if len(h) == 0 {
		// Nothing to read, not even a Date: the field set below (900
		// bytes to clear) was a tenth of what such a response costs the
		// Transport.
		return Info{}, false
	}
	// One pass over the keys finds every rate-limit field, so the cost does
	// not grow with the number of conventions known. The loop lives here,
	// not in a method, so its writes go to a known stack variable and need
	// no GC write barriers.
	var fs fieldSet
	var present, dup uint64 // bit f: stored field f was found; under several spellings
	var rare uint64         // bit f-numStored: field f, not a stored one, was found
	var date string
	for k, vs := range h {
		f, ok := classify(k)
		if !ok || len(vs) == 0 {
			// As http.Header.Get("Date") reads it: "Date" is canonical,
			// and Get looks up the canonical name only.
			if k == "Date" && len(vs) > 0 {
				date = vs[0]
			}
			continue
		}
		if f >= numStored {
			rare |= rareBit(f)
			continue
		}
		if present&(1<<f) != 0 {
			dup |= 1 << f
			continue
		}
		fs.vals[f] = vs
		present |= 1 << f
	}
	if date != "" && skew != nil {
		skew.Observe(date, now)
	}
	if present == 0 && rare == 0 {
		return Info{}, false
	}
	if dup != 0 {
		fs.prefer(h, dup)
	}
	var offset time.Duration
	if skew != nil {
		offset = skew.Offset(now)
	}
	horizon := max(caps.Reset, caps.Wait)
	// Field by field: a composite literal cost 2% more of the IETF
	// benchmark (BenchmarkParseHeadersIETF, CPU time).
	var p parser
	p.now, p.resetCap, p.slack, p.offset, p.wait = now, horizon, horizon, offset, caps.Wait
	var info Info
	if present != 0 {
		p.common(&fs, present, rare&rareBit(fXUsage) != 0, &info, out)
	}
	if rare != 0 {
		p.rare(h, rare, &fs, date == "", skew, &info, out)
	}
	if out.n > 1 {
		uniqueNames(out)
	}
	return info, p.found
}

// common reads the stored fields, present in the bit set present, into
// info and out: the conventions a response does not use are skipped by
// their bits, since most responses speak one. (Looked at field by field,
// the ones a GitHub-style response does not send were 7% of its parse.)
// strava tells that X-RateLimit-Limit is Strava's pair (see strava).
func (p *parser) common(fs *fieldSet, present uint64, strava bool, info *Info, out *Quotas) {
	if present&(1<<fRetryAfter|1<<fRetryAfterMs|1<<fMsRetryAfterMs) != 0 {
		for _, f := range [...]field{fRetryAfterMs, fMsRetryAfterMs, fRetryAfter} {
			if v := fs.first(f); v != "" {
				if f == fRetryAfter {
					info.RetryAfter, p.found = retryAfter(v, p.now, p.wait)
				} else if ms, ok := ParseDecimal(v); ok {
					info.RetryAfter, p.found = ClampSeconds(ms/1000, p.wait), true
				}
				if p.found {
					break
				}
			}
		}
	}
	if present&(1<<fRateLimit|1<<fRateLimitPolicy|1<<fRLLimit|1<<fRLRemaining) != 0 {
		p.ietf(fs, out)
	}
	if present&(1<<fXLimit|1<<fXRemaining|1<<fXUsed|1<<fXPolicy) != 0 && !strava {
		p.xRateLimit(fs, out)
	}
	if present&(1<<(fOpenAI+6)-1<<fOpenAI) != 0 {
		for i, name := range [...]string{"requests", "tokens"} {
			if f := fOpenAI + field(3*i); present&(7<<f) != 0 {
				p.counts(name, Unit(i), fs.first(f), fs.first(f+1), fs.first(f+2), renewal(fs, fRenewal+field(i)), out)
			}
		}
	}
	if present&(1<<(fAnthropic+12)-1<<fAnthropic) != 0 {
		for i, name := range [...]string{"requests", "tokens", "input-tokens", "output-tokens"} {
			if f := fAnthropic + field(3*i); present&(7<<f) != 0 {
				unit := Tokens
				if i == 0 {
					unit = Requests
				}
				p.counts(name, unit, fs.first(f), fs.first(f+1), fs.first(f+2), 0, out)
			}
		}
	}
	if present&(1<<fShopify) != 0 {
		p.shopify(fs.first(fShopify), out)
	}
	if present&(1<<fXBucket|1<<fXResource) != 0 {
		for _, f := range [...]field{fXBucket, fXResource} {
			if b := trimOWS(fs.first(f)); validBucket(b) {
				info.Bucket, p.found = b, true
				break
			}
		}
	}
	if present&(1<<fXGlobal|1<<fXScope) != 0 {
		if g := trimOWS(fs.first(fXGlobal)); strings.EqualFold(g, "true") || g == "1" ||
			strings.EqualFold(trimOWS(fs.first(fXScope)), "global") {
			info.Global, p.found = true, true
		}
	}
}

// uniqueNames appends "#2", "#3"… to a name already used by an earlier quota,
// so that a consumer can follow each quota from response to response by name
// (an unnamed policy beside an unnamed current quota, or a server sending both
// the IETF and the X-RateLimit fields).
func uniqueNames(qs *Quotas) {
	taken := func(n int, name string) bool {
		for i := range n {
			if qs.at(i).Name == name {
				return true
			}
		}
		return false
	}
	for i := 1; i < qs.n; i++ {
		q := qs.at(i)
		base := q.Name
		for k := 2; taken(i, q.Name); k++ {
			q.Name = base + "#" + strconv.Itoa(k)
		}
	}
}

// retryAfter parses a Retry-After value received at now: delta seconds
// (`120`, also the decimal `2.0` some servers send) or an HTTP-date in any of
// RFC 9110's three forms. A date in the past yields 0; waits beyond maxDelay
// are clamped to it. ok is false for anything else, such as negative numbers
// or garbage.
func retryAfter(v string, now time.Time, maxDelay time.Duration) (time.Duration, bool) {
	v = trimOWS(v)
	if s, ok := ParseDecimal(v); ok {
		return ClampSeconds(s, maxDelay), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxDelay), true
}

// parser accumulates the quotas of one response.
type parser struct {
	now      time.Time
	resetCap time.Duration // the farthest reset reported: Caps.Reset, or Caps.Wait if longer
	offset   time.Duration // the server's clock minus ours, for absolute resets
	slack    time.Duration // how far from now an absolute reset is believed: as resetCap
	wait     time.Duration // the longest wait believed: Caps.Wait
	found    bool
	// The quotas go to an out parameter of the methods, not to a field:
	// escape analysis does not tell a struct's fields apart, and the
	// quotas pointed to from p would go to the heap with the times and
	// names p's methods hand out.
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

// emit adds q to out if the server gave its limit or its remaining count; a
// reset alone says nothing a limiter can use.
//
// q is read by pointer, and the quota written into its place field by
// field: a state passed by value, and a Quota built apart and copied into
// out, were stored word by word and copied whole, and the copies' wide
// loads waited for the narrow stores (store-forwarding stalls, 4% of a
// GitHub-style parse). The same holds for combine and xRateLimitWith.
func (p *parser) emit(q *quotaState, out *Quotas) {
	if !q.hasLimit && !q.hasRemaining {
		return
	}
	p.found = true
	r := out.Append()
	if r == nil {
		return // as many as one response keeps
	}
	r.Name, r.Reset, r.Window, r.Unit = q.name, q.reset, q.window, q.unit
	if q.hasLimit {
		r.Limit = q.limit
	}
	switch {
	case !q.hasRemaining:
		r.Remaining = remainingUnknown
	case q.hasLimit && q.remaining > q.limit:
		r.Remaining = q.limit
	default:
		r.Remaining = q.remaining
	}
}

// combine emits the current quota q, taking name and window from the policy
// with the same limit, then the other policies. It completes q (see emit).
func (p *parser) combine(q *quotaState, ps *policies, out *Quotas) {
	if ps == nil {
		p.emit(q, out)
		return
	}
	matched := -1
	for i, pol := range ps.list[:ps.n] {
		if q.hasLimit && !pol.skip && pol.hasQ && pol.q == q.limit {
			matched = i
			if q.window == 0 {
				q.window = pol.window
			}
			if q.name == "" {
				q.name = pol.name
			}
			break
		}
	}
	p.emit(q, out)
	for i, pol := range ps.list[:ps.n] {
		if i != matched && !pol.skip {
			p.emit(&quotaState{name: pol.name, limit: pol.q, hasLimit: pol.hasQ, window: pol.window}, out)
		}
	}
}

// counts handles a quota stated in a limit, a remaining and a reset field
// of its own (OpenAI's and Anthropic's triples, X's app quota), counting
// unit, over window (0 if unknown).
func (p *parser) counts(name string, unit Unit, limit, remaining, reset string, window time.Duration, out *Quotas) {
	if limit == "" && remaining == "" {
		return
	}
	q := quotaState{name: name, unit: unit, window: window}
	q.limit, q.hasLimit = parseCount(limit)
	q.remaining, q.hasRemaining = parseCount(remaining)
	q.reset, _ = p.reset(reset)
	p.emit(&q, out)
}

// renewal is the window Azure OpenAI states of a quota in seconds
// (x-ratelimit-renewalperiod-requests: 60), in field f; 0 if none.
func renewal(fs *fieldSet, f field) time.Duration {
	if fs.vals[f] == nil {
		return 0
	}
	s, _ := parseCount(fs.first(f))
	return windowOf(s)
}

// windowOf is a window of s seconds; 0 unless s is positive and at most
// maxWindowSeconds.
func windowOf(s float64) time.Duration {
	if s > 0 && s <= maxWindowSeconds {
		return time.Duration(math.Round(s * 1e9))
	}
	return 0
}

// xRateLimit handles X-RateLimit-* and X-Rate-Limit-*. The limit may be a
// list (`100, 100;window=60, 10000;window=86400`) as in the older IETF
// drafts; or every field may be a list read by position, as Brave sends
// them (xRateLimitLists).
func (p *parser) xRateLimit(fs *fieldSet, out *Quotas) {
	if fs.vals[fXLimit] == nil && fs.vals[fXRemaining] == nil && fs.vals[fXUsed] == nil && fs.vals[fXPolicy] == nil {
		return
	}
	var x xFields
	x.read(fs)
	if fs.vals[fXPolicy] != nil || !x.plain && isXList(fs) {
		p.xRateLimitLists(fs, out)
		return
	}
	// Only a list needs room for its policies (776 bytes to clear): the
	// usual plain number goes without, read here once.
	// (Several lines are joined into a list by limitField.)
	var q quotaState
	vs := fs.vals[fXLimit]
	if len(vs) == 1 {
		q.limit, q.hasLimit = parseCount(vs[0])
	}
	if len(vs) > 1 || len(vs) == 1 && !q.hasLimit {
		var ps policies
		p.limitField(fs, fXLimit, &q, &ps)
		p.xRateLimitWith(fs, &q, &x, &ps, out)
		return
	}
	p.xRateLimitWith(fs, &q, &x, nil, out)
}

// xFields is what the reading of a single quota (xRateLimitWith) takes of
// the X-RateLimit fields that may hold a list read by position (isXList),
// read once: the first line of each, as a number.
type xFields struct {
	remaining, used, resetAfter, reset             float64
	hasRemaining, hasUsed, hasResetAfter, hasReset bool // hasReset: a number
	// plain: every one of them is absent or one line that reads as a
	// number, so none is a list (a list's comma is no digit), and isXList
	// need not look for one (its looking was 7% of a GitHub-style parse).
	plain bool
}

// read sets x from fs, field by field (returned whole, x was stored word
// by word and copied, and the copy stalled on store forwarding).
func (x *xFields) read(fs *fieldSet) {
	x.remaining, x.hasRemaining = parseCount(fs.first(fXRemaining))
	x.used, x.hasUsed = parseCount(fs.first(fXUsed))
	x.resetAfter, x.hasResetAfter = ParseDecimal(fs.first(fXResetAfter))
	x.reset, x.hasReset = ParseDecimal(fs.first(fXReset))
	x.plain = plainField(fs, fXRemaining, x.hasRemaining) && plainField(fs, fXUsed, x.hasUsed) &&
		plainField(fs, fXResetAfter, x.hasResetAfter) && plainField(fs, fXReset, x.hasReset)
}

// plainField reports whether field f is absent, or one line that read as a
// number (number).
func plainField(fs *fieldSet, f field, number bool) bool {
	vs := fs.vals[f]
	return len(vs) == 0 || len(vs) == 1 && number
}

// xRateLimitWith is xRateLimit once the limit is read into q and the other
// fields into x; ps holds the policies of a list limit, nil when the limit
// is a plain number or absent. It completes q, and emits it (see emit).
func (p *parser) xRateLimitWith(fs *fieldSet, q *quotaState, x *xFields, ps *policies, out *Quotas) {
	q.remaining, q.hasRemaining = x.remaining, x.hasRemaining
	if used := x.used; x.hasUsed {
		switch {
		case !q.hasLimit && q.hasRemaining:
			q.limit, q.hasLimit = q.remaining+used, true
		case q.hasLimit && !q.hasRemaining:
			q.remaining, q.hasRemaining = max(q.limit-used, 0), true
		}
	}
	if q.window == 0 && q.hasLimit && fs.vals[fXFillRate] != nil {
		q.window = fillTime(q.limit, fs.first(fXFillRate), fs.first(fXFillRate+1))
	}
	switch {
	case x.hasResetAfter:
		q.reset = p.after(x.resetAfter)
	case x.hasReset:
		q.reset, _ = p.resetNumber(x.reset) // what reset makes of a number
	default:
		q.reset, _ = p.reset(fs.first(fXReset))
	}
	p.combine(q, ps, out)
}

// shopify handles `X-Shopify-Shop-Api-Call-Limit: 32/40` (used/limit).
func (p *parser) shopify(v string, out *Quotas) {
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
		p.emit(&q, out)
	}
}

// reset parses a reset that is not a structured field: a number (see
// resetNumber), a Go duration from now, or an absolute date.
func (p *parser) reset(v string) (time.Time, bool) {
	v = trimOWS(v)
	if v == "" {
		return time.Time{}, false
	}
	if s, ok := ParseDecimal(v); ok {
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
func (p *parser) resetNumber(v float64) (time.Time, bool) {
	if !(v >= 0) || math.IsInf(v, 0) {
		return time.Time{}, false
	}
	// In the server's clock: its epoch is compared with its now, in whole
	// seconds and nanoseconds as now.Add(offset).Unix() and .Nanosecond()
	// would give them, without building that time.
	un := p.now.UnixNano() + int64(p.offset)
	sec := un / 1e9
	if un%1e9 < 0 {
		sec-- // floored, as Unix() is: the nanoseconds are never negative
	}
	nowSec := float64(sec) + float64(un-sec*1e9)/1e9
	slack := seconds(p.slack)
	// An epoch in seconds, else in milliseconds (divided only then).
	d := v - nowSec
	if !(d >= -slack && d <= slack) {
		d = v/1000 - nowSec
	}
	if d >= -slack && d <= slack {
		// Microseconds are as fine as any server's clock.
		return p.now.Add(min(ClampSeconds(d, p.resetCap).Round(time.Microsecond), p.resetCap)), true
	}
	if v < epochFloor {
		return p.after(v), true
	}
	return time.Time{}, false
}

// after returns now plus s seconds, clamped to [now, now+resetCap].
func (p *parser) after(s float64) time.Time {
	return p.now.Add(ClampSeconds(s, p.resetCap))
}

// at converts an absolute reset: believed within p.slack of now, a past one
// meaning now, a later one clamped to now+resetCap.
func (p *parser) at(t time.Time) (time.Time, bool) {
	d := t.Sub(p.now) - p.offset
	if d < -p.slack || d > p.slack {
		return time.Time{}, false
	}
	return p.now.Add(min(max(d, 0), p.resetCap)), true
}

// Finding the rate-limit fields among the headers of a response: the one
// pass over its keys that Parse begins with.

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
	fXFillRate = fShopify + 1   // Jira's X-RateLimit-FillRate, -Interval-Seconds
	fRenewal   = fXFillRate + 2 // Azure OpenAI's x-ratelimit-renewalperiod-requests, -tokens
	// numStored: the fields above are the common ones, whose values the
	// pass keeps as it meets them (fieldSet); the ones below are found by
	// the pass too, but their values are looked up in a second pass, only
	// for a response that has one (rareSet), so that their room is not
	// cleared for every response.
	numStored  = fRenewal + 2
	fXUsage    = numStored      // Strava's X-RateLimit-Usage
	fXRead     = fXUsage + 1    // Strava's X-ReadRateLimit-Limit, -Usage
	fXSuffixed = fXRead + 2     // x-ratelimit-{limit,remaining,reset}-NAME-{tokens,requests} (read apart: suffixed)
	fXApp      = fXSuffixed + 1 // X's x-app-rate-limit-limit, -remaining, -reset
	fHubSpot   = fXApp + 3      // HubSpot's, in the order of families
	fMistral   = fHubSpot + 7   // Mistral's, in the order of families
	fSforce    = fMistral + 8   // Salesforce's Sforce-Limit-Info
	fMeta      = fSforce + 1    // Meta's x-app-usage, x-page-usage, x-business-use-case-usage
	fMWS       = fMeta + 3      // Amazon MWS's x-mws-quota-max, -remaining, -resetsOn, x-mws-timestamp
	fARM       = fMWS + 4       // Azure Resource Manager's x-ms-ratelimit-remaining-* (read apart: arm)
	numFields  = fARM + 1
)

// Parse keeps the stored fields it found in one bit set, the others in
// another (bit f-numStored).
var (
	_ [64 - numStored]struct{}
	_ [64 - (numFields - numStored)]struct{}
)

// rareBit is the bit of field f, not a stored one, in Parse's second set.
func rareBit(f field) uint64 { return 1 << (f - numStored) }

// rareBits is the bits of the n fields from f on.
func rareBits(f field, n int) uint64 { return (1<<n - 1) << (f - numStored) }

// fieldSet holds the values of the fields present in one response.
type fieldSet struct {
	vals [numStored][]string
}

// prefer sets the fields of the bit set dup, found in h under several
// spellings, to the value of the preferred spelling (preferKey). Rare, so
// done in a second pass: keeping every field's key in the first cost
// clearing 600 bytes per response.
func (fs *fieldSet) prefer(h map[string][]string, dup uint64) {
	var keys [numStored]string
	for k, vs := range h {
		f, ok := classify(k)
		if !ok || f >= numStored || len(vs) == 0 || dup&(1<<f) == 0 {
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
	// The first bytes, in any case, reject nearly every other header
	// before any call: x-ra…, x-rea…, x-s…, x-m…, x-h…, x-b…, x-ap…, x-pa…,
	// ra…, ret…, an…, sf… (X-Request-Id, common, is x-req…).
	if len(k) < len("ratelimit") {
		return 0, false
	}
	switch c0, c1, c2 := k[0]|0x20, k[1]|0x20, k[2]|0x20; {
	case c0 == 'x' && c1 == '-' && (xThirdBytes>>(c2&31)&1 != 0 ||
		c2 == 'r' && (k[3]|0x20 == 'a' || k[3]|0x20 == 'e' && k[4]|0x20 == 'a') ||
		c2 == 'a' && k[3]|0x20 == 'p' || c2 == 'p' && k[3]|0x20 == 'a'),
		c0 == 'r' && (c1 == 'a' || c1 == 'e' && c2 == 't'),
		c0 == 'a' && c1 == 'n',
		c0 == 's' && c1 == 'f':
		return classifyFold(k)
	}
	return 0, false
}

// xThirdBytes is the set of the third bytes of the x- names that need no
// more to be read by classifyFold (x-shopify-, x-ms-, x-mws-, x-hubspot-,
// x-business-), as bits of their low five bits; a byte that is no letter
// may alias one, and is then rejected further on.
const xThirdBytes = 1<<('s'&31) | 1<<('m'&31) | 1<<('h'&31) | 1<<('b'&31)

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
	const maxLen = maxFieldName
	if len(k) < len("ratelimit") {
		return 0, false
	}
	if rest, ok := cutPrefixFold(k, "x-ratelimit-"); ok {
		// The common case (GitHub, X, Reddit, Discord), without copying the
		// prefix.
		var buf [maxLen - len("x-ratelimit-")]byte
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
	if rest, ok := cutPrefixFold(k, "x-ms-ratelimit-remaining-"); ok {
		// Azure Resource Manager's names are many and long: they are
		// read apart (arm), by this prefix.
		return fARM, rest != "" && len(rest) <= maxNameLen
	}
	if len(k) > maxLen {
		return 0, false
	}
	var buf [maxLen]byte
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return classifyLower(buf[:len(k)])
}

// classifyLower is classify for a name in lower case, of at most
// maxFieldName bytes.
func classifyLower(b []byte) (field, bool) {
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
	for _, fam := range &families {
		if rest, ok := cutPrefix(b, fam.prefix); ok {
			for i, name := range fam.names {
				if string(rest) == name {
					return fam.first + field(i), true
				}
			}
			return 0, false
		}
	}
	// Only names of at most 32 bytes are converted to strings: the compiler
	// keeps those on the stack, so classifying never allocates.
	if len(b) > len("x-shopify-shop-api-call-limit") {
		return 0, false
	}
	switch string(b) {
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
	case "sforce-limit-info":
		return fSforce, true
	case "x-app-usage":
		return fMeta, true
	case "x-page-usage":
		return fMeta + 1, true
	case "x-business-use-case-usage":
		return fMeta + 2, true
	}
	return 0, false
}

// families are the fields whose names are a prefix and one of a list of
// suffixes, the i-th suffix naming field first+i.
var families = [...]struct {
	prefix string
	first  field
	names  []string
}{
	{"x-readratelimit-", fXRead, []string{"limit", "usage"}},
	{"x-app-rate-limit-", fXApp, []string{"limit", "remaining", "reset"}},
	{"x-hubspot-ratelimit-", fHubSpot, []string{"daily", "daily-remaining", "secondly", "secondly-remaining",
		"max", "remaining", "interval-milliseconds"}},
	{"x-ratelimitbysize-", fMistral, []string{"limit-minute", "remaining-minute", "limit-month", "remaining-month"}},
	{"ratelimitbysize-", fMistral + 4, []string{"limit", "remaining", "reset", "query-cost"}},
	{"x-mws-", fMWS, []string{"quota-max", "quota-remaining", "quota-resetson", "timestamp"}},
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

// classifyX maps the rest of an X-RateLimit- or X-Rate-Limit- name, in
// lower case.
func classifyX(b []byte) (field, bool) {
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
	case "usage":
		return fXUsage, true
	case "fillrate":
		return fXFillRate, true
	case "interval-seconds":
		return fXFillRate + 1, true
	case "renewalperiod-requests":
		return fRenewal, true
	case "renewalperiod-tokens":
		return fRenewal + 1, true
	}
	if _, _, ok := suffixedPart(string(b)); ok {
		return fXSuffixed, true
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

// The IETF fields (RateLimit-Policy and RateLimit, every draft), read from
// the fields the pass found.

// sfv hands out at most sfv.MaxMembers members of a field, and a response
// keeps at most maxQuotas quotas: the first must cover the second.
var _ [sfv.MaxMembers - maxQuotas]struct{}

// This file holds the semantics of the IETF RateLimit fields, every draft
// generation; their RFC 9651 syntax is parsed by package sfv.

// policy is one IETF quota policy: `"burst";q=100;w=60` or, before
// draft-08, `100;w=60`.
type policy struct {
	name   string
	q      float64
	hasQ   bool
	window time.Duration
	skip   bool // a unit other than requests: matched, never reported
}

type policies struct {
	list [maxQuotas]policy
	n    int
}

// add records the policy m describes and reports whether there is room for
// more.
func (ps *policies) add(m sfv.Member) bool {
	pol, ok := policyOf(m)
	if !ok {
		return true
	}
	ps.list[ps.n] = pol
	ps.n++
	return ps.n < maxQuotas
}

// policyOf reads the policy m describes; false when m describes none (an
// item that is neither a number nor a name, or an overlong name).
func policyOf(m sfv.Member) (policy, bool) {
	var pol policy
	params := ietfParamsOf(m.Params)
	switch m.Value.Kind {
	case sfv.Integer, sfv.Decimal:
		pol.q, pol.hasQ = m.Value.Num, m.Value.Num >= 0
	case sfv.String, sfv.Token:
		if pol.name = m.Value.Str; len(pol.name) > maxNameLen {
			return policy{}, false
		}
		n, isNum := params.q.Number()
		pol.q, pol.hasQ = n, isNum && n >= 0
	default:
		return policy{}, false
	}
	if params.qu.Kind != 0 {
		unit, _ := params.qu.Name()
		pol.skip = unit != "requests"
	}
	pol.window = params.windowLen()
	return pol, true
}

// ietfParams holds the parameters the IETF drafts define, each the zero
// sfv.Item when absent: q, qu and w (window in the first draft) of a policy;
// r and t of a RateLimit item, or a and w as proposed in 2026 to rename
// them (see draft08).
type ietfParams struct{ q, qu, w, window, r, t, a sfv.Item }

// ietfParamsOf reads all of them in one pass over the parameters.
func ietfParamsOf(ps sfv.Params) ietfParams {
	var ip ietfParams
	ps.Each(func(k string, v sfv.Item) {
		switch k {
		case "q":
			ip.q = v
		case "qu":
			ip.qu = v
		case "w":
			ip.w = v
		case "window":
			ip.window = v
		case "r":
			ip.r = v
		case "t":
			ip.t = v
		case "a":
			ip.a = v
		}
	})
	return ip
}

// windowLen is the policy window, w= or else window=, in seconds.
func (ip ietfParams) windowLen() time.Duration {
	w := ip.w
	if w.Kind == 0 {
		w = ip.window
	}
	s, _ := w.Number()
	return windowOf(s)
}

// ietf handles RateLimit, RateLimit-Policy and the older RateLimit-Limit,
// -Remaining and -Reset, newest draft first.
func (p *parser) ietf(fs *fieldSet, out *Quotas) {
	if fs.vals[fRateLimit] == nil && fs.vals[fRateLimitPolicy] == nil &&
		fs.vals[fRLLimit] == nil && fs.vals[fRLRemaining] == nil {
		return
	}
	var ps policies
	if v, ok := fs.joined(fRateLimitPolicy); ok && !sfv.Each(v, false, ps.add) {
		if v, ok := unlabelled(v); ok {
			sfv.Each(v, false, ps.add)
		}
	}
	if v, ok := fs.joined(fRateLimit); ok && (p.draft07(v, &ps, out) || p.draft08(v, &ps, out)) {
		return
	}
	var q quotaState
	if fs.vals[fRLLimit] != nil || fs.vals[fRLRemaining] != nil {
		p.limitField(fs, fRLLimit, &q, &ps)
		q.remaining, q.hasRemaining = remainingField(fs.first(fRLRemaining))
		q.reset, _ = p.reset(fs.first(fRLReset))
	}
	p.combine(&q, &ps, out)
}

// draft07 handles the dictionary `RateLimit: limit=100, remaining=50, reset=5`.
func (p *parser) draft07(v string, ps *policies, out *Quotas) bool {
	var q quotaState
	valid := sfv.Each(v, true, func(m sfv.Member) bool {
		n, ok := m.Value.Number()
		if !ok || n < 0 {
			return true
		}
		switch m.Key {
		case "limit":
			q.limit, q.hasLimit = n, true
		case "remaining":
			q.remaining, q.hasRemaining = n, true
		case "reset":
			q.reset, _ = p.resetNumber(n)
		}
		return true
	})
	if !valid || (!q.hasLimit && !q.hasRemaining) {
		return false
	}
	p.combine(&q, ps, out)
	return true
}

// draft08 handles the list `RateLimit: "default";r=50;t=30`, whose items name
// the RateLimit-Policy policies they report on: r is what is left of the
// policy (draft-11: the available quota), t the seconds until more is
// available (draft-11: the effective window, within which the client may
// use no more than r).
//
// It also reads `RateLimit: "default";a=50;w=30`: a (available) for r and
// w (the effective window, named like the policy's window) for t, as one of
// the draft's authors proposed in 2026 (in the discussion of pull request
// 164 of ietf-wg-httpapi/ratelimit-headers); drafts 08 to 11 define only r
// and t. Where an item has both names, r and t win. Any other parameter (a
// per-request cost c, a partition key pk) is a comment, as the draft says.
func (p *parser) draft08(v string, ps *policies, out *Quotas) bool {
	type item struct {
		name      string
		remaining float64
		hasR      bool
		reset     time.Time
		used      bool
	}
	var items [maxQuotas]item
	n := 0
	valid := sfv.Each(v, false, func(m sfv.Member) bool {
		name, ok := m.Value.Name()
		if !ok || len(name) > maxNameLen {
			return true
		}
		it := item{name: name}
		params := ietfParamsOf(m.Params)
		left, window := params.r, params.t
		if left.Kind == 0 {
			left = params.a
		}
		if window.Kind == 0 {
			window = params.w
		}
		x, isNum := left.Number()
		it.remaining, it.hasR = x, isNum && x >= 0
		if x, isNum := window.Number(); isNum {
			it.reset, _ = p.resetNumber(x)
		}
		items[n] = it
		n++
		return n < maxQuotas
	})
	if !valid {
		return false
	}
	for _, pol := range ps.list[:ps.n] {
		q := quotaState{name: pol.name, limit: pol.q, hasLimit: pol.hasQ, window: pol.window}
		for j := range items[:n] {
			if it := &items[j]; !it.used && it.name == pol.name {
				it.used = true
				q.remaining, q.hasRemaining, q.reset = it.remaining, it.hasR, it.reset
				break
			}
		}
		if !pol.skip {
			p.emit(&q, out)
		}
	}
	for _, it := range items[:n] {
		if !it.used {
			p.emit(&quotaState{name: it.name, remaining: it.remaining, hasRemaining: it.hasR, reset: it.reset}, out)
		}
	}
	return true
}

// limitField reads a limit that is a plain number or, as in the older IETF
// drafts, a list whose first member is the current limit and whose others are
// policies (`10, 10;w=1, 50;w=60`).
func (p *parser) limitField(fs *fieldSet, f field, q *quotaState, ps *policies) {
	v, ok := fs.joined(f)
	if q.limit, q.hasLimit = parseCount(v); q.hasLimit || !ok {
		return
	}
	first := true
	sfv.Each(v, false, func(m sfv.Member) bool {
		if first {
			first = false
			if n, ok := m.Value.Number(); ok && n >= 0 {
				q.limit, q.hasLimit, q.window = n, true, ietfParamsOf(m.Params).windowLen()
				return true
			}
		}
		if ps == nil {
			return false // xRateLimit saw a plain number: no policies to keep
		}
		return ps.add(m)
	})
}

// remainingField reads a remaining count: a plain number or, as Docker
// Hub's registry sends it in the early IETF form, a list whose first
// member is the count with the policy's window beside it
// (`ratelimit-remaining: 196;w=21600`, https://docs.docker.com/docker-hub/usage/pulls/).
func remainingField(v string) (float64, bool) {
	if x, ok := parseCount(v); ok || v == "" {
		return x, ok
	}
	var x float64
	var ok bool
	sfv.Each(v, false, func(m sfv.Member) bool {
		n, isNum := m.Value.Number()
		x, ok = n, isNum && n >= 0
		return false
	})
	return x, ok
}

// unlabelled rewrites a RateLimit-Policy whose members put a quoted label
// before the policy's name, as Hugging Face's Hub sends it
// (`"fixed window";"api";q=1000;w=300`: the label where RFC 9651 wants a
// parameter's key, so the field is invalid), without the labels:
// `"api";q=1000;w=300`. ok is false when no member has one; the rewrite is
// parsed as strictly as any field, so that nothing else invalid passes.
func unlabelled(v string) (string, bool) {
	var b strings.Builder
	copied, found := 0, false // v[:copied] is written to b or dropped
	member := true            // at the start of a member
	for i := 0; i < len(v); {
		switch c := v[i]; {
		case member && (c == ' ' || c == '\t'):
			i++
		case member:
			member = false
			if end := quotedEnd(v, i); end > 0 && end+1 < len(v) && v[end] == ';' && v[end+1] == '"' {
				b.WriteString(v[copied:i])
				copied, found, i = end+1, true, end+1
			}
		case c == '"':
			if i = quotedEnd(v, i); i < 0 {
				return "", false
			}
		case c == ',':
			member = true
			i++
		default:
			i++
		}
	}
	if !found {
		return "", false
	}
	b.WriteString(v[copied:])
	return b.String(), true
}

// quotedEnd returns the index just past the RFC 9651 string that starts at
// v[i], or -1 when none starts there or it is not closed.
func quotedEnd(v string, i int) int {
	if i >= len(v) || v[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(v); j++ {
		switch v[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// fillTime is the time a token bucket of limit takes to fill from empty
// when it gains fillRate tokens every interval seconds, as Jira Data
// Center states it (X-RateLimit-FillRate, X-RateLimit-Interval-Seconds, the
// headers of Atlassian's Data Center rate limiting:
// https://confluence.atlassian.com/conf87/_ratelimiting_httpheaders-1333822054.html);
// 0 unless both are positive numbers and the time is at most
// maxWindowSeconds.
func fillTime(limit float64, fillRate, interval string) time.Duration {
	rate, okR := parseCount(fillRate)
	every, okI := parseCount(interval)
	if !okR || !okI || !(rate > 0) || !(every > 0) {
		return 0
	}
	return windowOf(limit * every / rate)
}

// The values of rate-limit fields: numbers, durations and dates as servers
// write them.

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// ClampSeconds converts s seconds (possibly +Inf) to a Duration in
// [0, maxDelay]; NaN gives 0.
func ClampSeconds(s float64, maxDelay time.Duration) time.Duration {
	if !(s > 0) {
		return 0
	}
	if s >= seconds(maxDelay) {
		return maxDelay
	}
	// Checked again in nanoseconds, where rounding near the largest
	// Duration could otherwise wrap.
	if d := time.Duration(math.Round(s * 1e9)); d >= 0 && d < maxDelay {
		return d
	}
	return maxDelay
}

// seconds is d.Seconds(), without its division when d is whole seconds (a
// configured cap: DefaultMaxDelay, a MaxWait, MaxResetHorizon), where it
// adds float64(0)/1e9, +0, to the seconds: the same value. A numeric
// reset converts two such caps, and their divisions were 0.8% of a
// GitHub-style response's CPU time through the Transport.
func seconds(d time.Duration) float64 {
	if d%time.Second == 0 {
		return float64(d / time.Second)
	}
	return d.Seconds()
}

// ParseDecimal parses a plain decimal number, 1*DIGIT ["." 1*DIGIT], around
// optional whitespace. A digit string too long for a float64 is +Inf.
func ParseDecimal(v string) (float64, bool) {
	v = trimOWS(v)
	if v == "" || !isDigit(v[0]) {
		return 0, false
	}
	var n uint64
	i := 0
	// Eight digits at a time while there are eight: the counts and epoch
	// resets servers send are 9 to 13 digits (GitHub's limit, remaining
	// and reset), and digit by digit they were 5% of a GitHub-style
	// response's instructions through the Transport.
	for ; i+8 <= len(v); i += 8 {
		x, ok := eightDigits(v[i : i+8])
		if !ok {
			break
		}
		n = n*1e8 + x
	}
	for ; i < len(v) && isDigit(v[i]); i++ {
		n = n*10 + uint64(v[i]-'0')
	}
	if i == len(v) && i <= 15 {
		return float64(n), true // exact; the common case, with no strconv call
	}
	if i < len(v) {
		if v[i] != '.' || i+1 == len(v) {
			return 0, false
		}
		for i++; i < len(v); i++ {
			if !isDigit(v[i]) {
				return 0, false
			}
		}
	}
	f, _ := strconv.ParseFloat(v, 64) // syntax already checked; overflow gives +Inf
	return f, true
}

// eightDigits returns the number the 8 bytes of b spell if they are all
// decimal digits (SWAR: the bytes as one little-endian word, checked and
// combined in pairs, fours and eights, as simdjson parses eight digits).
func eightDigits(b string) (uint64, bool) {
	_ = b[7]
	x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	// Every byte 0x30..0x39: its high nibble is 3, and still 3 with 6
	// added (no carry crosses a byte whose high nibble is 3).
	const hi, threes, sixes = 0xF0F0F0F0F0F0F0F0, 0x3030303030303030, 0x0606060606060606
	if x&hi != threes || (x+sixes)&hi != threes {
		return 0, false
	}
	x = (x & 0x0F0F0F0F0F0F0F0F) * 2561 >> 8                     // pairs: 10*first + second
	x = (x & 0x00FF00FF00FF00FF) * 6553601 >> 16                 // fours
	return (x & 0x0000FFFF0000FFFF) * 42949672960001 >> 32, true // eight
}

// parseCount parses a finite, non-negative count.
func parseCount(v string) (float64, bool) {
	f, ok := ParseDecimal(v)
	if !ok || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// parseDuration parses a Go-style duration ("1s", "6m0s", "2m59.56s",
// "1h2m3s", "12ms") into seconds, without time.ParseDuration's allocation on
// failure. Signs are not accepted.
func parseDuration(v string) (float64, bool) {
	if v == "" {
		return 0, false
	}
	total := 0.0
	for v != "" {
		i, digits := 0, 0
		for ; i < len(v) && (isDigit(v[i]) || v[i] == '.'); i++ {
			if v[i] != '.' {
				digits++
			}
		}
		if digits == 0 || strings.Count(v[:i], ".") > 1 {
			return 0, false
		}
		n, _ := strconv.ParseFloat(v[:i], 64)
		j := i
		for j < len(v) && !isDigit(v[j]) && v[j] != '.' {
			j++
		}
		var unit float64
		switch v[i:j] {
		case "h":
			unit = 3600
		case "m":
			unit = 60
		case "s":
			unit = 1
		case "ms":
			unit = 1e-3
		case "us", "µs", "μs":
			unit = 1e-6
		case "ns":
			unit = 1e-9
		default:
			return 0, false
		}
		total += n * unit
		v = v[j:]
	}
	return total, true
}

// parseDate parses the absolute resets servers send: RFC 3339 (Anthropic),
// HTTP-date and JavaScript's Date.toString (seen from Lemlist).
func parseDate(v string) (time.Time, bool) {
	if len(v) >= 20 && isDigit(v[0]) && v[4] == '-' {
		t, err := time.Parse(time.RFC3339Nano, v)
		return t, err == nil
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	js, _, _ := strings.Cut(v, " (")
	t, err := time.Parse("Mon Jan 02 2006 15:04:05 GMT-0700", js)
	return t, err == nil
}

func trimOWS(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// validBucket accepts 1 to 256 visible ASCII characters: a bucket becomes a
// map key, so a hostile one must not be able to grow memory.
func validBucket(b string) bool {
	if b == "" || len(b) > maxNameLen {
		return false
	}
	for i := 0; i < len(b); i++ {
		if b[i] <= ' ' || b[i] > '~' {
			return false
		}
	}
	return true
}
