package header

import (
	"math"
	"time"

	"github.com/pacer-go/pacer/internal/header/sfv"
)

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
	if s, ok := w.Number(); ok && s > 0 && s <= maxWindowSeconds {
		return time.Duration(math.Round(s * 1e9))
	}
	return 0
}

// ietf handles RateLimit, RateLimit-Policy and the older RateLimit-Limit,
// -Remaining and -Reset, newest draft first.
func (p *parser) ietf(fs *fieldSet, out *Quotas) {
	if fs.vals[fRateLimit] == nil && fs.vals[fRateLimitPolicy] == nil &&
		fs.vals[fRLLimit] == nil && fs.vals[fRLRemaining] == nil {
		return
	}
	var ps policies
	if v, ok := fs.joined(fRateLimitPolicy); ok {
		sfv.Each(v, false, ps.add)
	}
	if v, ok := fs.joined(fRateLimit); ok && (p.draft07(v, &ps, out) || p.draft08(v, &ps, out)) {
		return
	}
	var q quotaState
	if fs.vals[fRLLimit] != nil || fs.vals[fRLRemaining] != nil {
		p.limitField(fs, fRLLimit, &q, &ps)
		q.remaining, q.hasRemaining = parseCount(fs.first(fRLRemaining))
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
