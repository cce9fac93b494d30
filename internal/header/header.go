package header

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
	// Window is the policy's window length; 0 if unknown.
	Window time.Duration
	// Unit is what the quota counts.
	Unit Unit
}

// Unit is what a Quota counts.
type Unit uint8

const (
	// Requests: every request takes one.
	Requests Unit = iota
	// Tokens: a request takes its cost (OpenAI's and Anthropic's
	// *-tokens fields).
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

const (
	maxQuotas = 16 // kept of one response
	// epochFloor is the smallest number taken for an epoch timestamp
	// (2001-09-09 in seconds); smaller numbers are seconds from now.
	epochFloor = 1e9
	// maxWindowSeconds bounds a policy window (w=) to one leap year.
	maxWindowSeconds = 366 * 24 * 3600
	maxNameLen       = 256
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
// states a rate limit, and asks for the offset once it has found one.
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
	var present, dup uint64 // bit f: field f was found; under several spellings
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
	if present == 0 {
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
	p.now, p.resetCap, p.slack, p.offset = now, horizon, horizon, offset
	var info Info
	// The conventions a response does not use are skipped by their bits:
	// most responses speak one. (Looked at field by field, the ones a
	// GitHub-style response does not send were 7% of its parse.)
	if present&(1<<fRetryAfter|1<<fRetryAfterMs|1<<fMsRetryAfterMs) != 0 {
		for _, f := range [...]field{fRetryAfterMs, fMsRetryAfterMs, fRetryAfter} {
			if v := fs.first(f); v != "" {
				if f == fRetryAfter {
					info.RetryAfter, p.found = retryAfter(v, now, caps.Wait)
				} else if ms, ok := ParseDecimal(v); ok {
					info.RetryAfter, p.found = ClampSeconds(ms/1000, caps.Wait), true
				}
				if p.found {
					break
				}
			}
		}
	}
	if present&(1<<fRateLimit|1<<fRateLimitPolicy|1<<fRLLimit|1<<fRLRemaining) != 0 {
		p.ietf(&fs, out)
	}
	if present&(1<<fXLimit|1<<fXRemaining|1<<fXUsed|1<<fXPolicy) != 0 {
		p.xRateLimit(&fs, out)
	}
	if present&(1<<(fOpenAI+6)-1<<fOpenAI) != 0 {
		for i, name := range [...]string{"requests", "tokens"} {
			if f := fOpenAI + field(3*i); present&(7<<f) != 0 {
				p.counts(name, fs.first(f), fs.first(f+1), fs.first(f+2), out)
			}
		}
	}
	if present&(1<<(fAnthropic+12)-1<<fAnthropic) != 0 {
		for i, name := range [...]string{"requests", "tokens", "input-tokens", "output-tokens"} {
			if f := fAnthropic + field(3*i); present&(7<<f) != 0 {
				p.counts(name, fs.first(f), fs.first(f+1), fs.first(f+2), out)
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
	if out.n > 1 {
		uniqueNames(out)
	}
	return info, p.found
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
	if out.n == maxQuotas {
		return
	}
	var r *Quota
	if out.n < len(out.room) {
		r = &out.room[out.n]
	} else {
		out.more = append(out.more, Quota{})
		r = &out.more[len(out.more)-1]
	}
	out.n++
	r.Name, r.Reset, r.Window, r.Unit = q.name, q.reset, q.window, q.unit
	r.Limit = 0
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

// counts handles the limit/remaining/reset triples of OpenAI and Anthropic.
func (p *parser) counts(name, limit, remaining, reset string, out *Quotas) {
	if limit == "" && remaining == "" {
		return
	}
	q := quotaState{name: name}
	if name != "requests" {
		q.unit = Tokens
	}
	q.limit, q.hasLimit = parseCount(limit)
	q.remaining, q.hasRemaining = parseCount(remaining)
	q.reset, _ = p.reset(reset)
	p.emit(&q, out)
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
