package header

import (
	"math"
	"strings"

	"github.com/pacer-go/pacer/internal/header/sfv"
)

// X-RateLimit-* fields that are comma lists read by position, one quota per
// position, as Brave's Search API sends them. Its documented example is a
// per-second and a monthly quota:
//
//	X-RateLimit-Policy: 1;w=1, 15000;w=2592000
//	X-RateLimit-Limit: 1, 15000
//	X-RateLimit-Remaining: 1, 1000
//	X-RateLimit-Reset: 1, 1419704
//
// 1 request per 1 s window with 1 left and the second over in 1 s; 15000
// per 2592000 s (a month) with 1000 left and the month over in 1419704 s.

// isXList reports whether the X-RateLimit fields are lists read by
// position: there is an X-RateLimit-Policy, or a Remaining, Reset,
// Reset-After or Used that holds several numbers. Otherwise a list limit
// is the older IETF form (the current limit, then policies), which
// xRateLimitWith reads.
func isXList(fs *fieldSet) bool {
	if fs.vals[fXPolicy] != nil {
		return true
	}
	for _, f := range [...]field{fXRemaining, fXReset, fXResetAfter, fXUsed} {
		// The comma first: the usual single number costs no more (and a
		// single line is not joined to find one; several lines joined
		// always have one).
		vs := fs.vals[f]
		if len(vs) == 0 || len(vs) == 1 && strings.IndexByte(vs[0], ',') < 0 {
			continue
		}
		v, _ := fs.joined(f)
		var xs [maxQuotas]float64
		if numberList(v, &xs) > 1 {
			return true
		}
	}
	return false
}

// listLimits reads the X-RateLimit-Limit and -Policy lists into qs (skip
// marks a policy in units other than requests) and returns how many
// positions they hold (see xRateLimitLists).
func listLimits(fs *fieldSet, qs *[maxQuotas]quotaState, skip *[maxQuotas]bool) int {
	n := 0
	if v, ok := fs.joined(fXLimit); ok {
		if x, ok := parseCount(v); ok {
			qs[0].limit, qs[0].hasLimit = x, true
			n = 1
		} else {
			i := 0
			sfv.Each(v, false, func(m sfv.Member) bool {
				if x, ok := m.Value.Number(); ok && x >= 0 {
					qs[i].limit, qs[i].hasLimit, qs[i].window = x, true, ietfParamsOf(m.Params).windowLen()
				}
				i++
				return i < maxQuotas
			})
			n = i
		}
	}
	if v, ok := fs.joined(fXPolicy); ok {
		i := 0
		sfv.Each(v, false, func(m sfv.Member) bool {
			if pol, ok := policyOf(m); ok {
				q := &qs[i]
				q.name, skip[i] = pol.name, pol.skip
				if !q.hasLimit && pol.hasQ {
					q.limit, q.hasLimit = pol.q, true
				}
				if q.window == 0 {
					q.window = pol.window
				}
			}
			i++
			return i < maxQuotas
		})
		n = max(n, i)
	}
	return n
}

// xRateLimitLists reads the X-RateLimit fields by position (isXList): the
// i-th member of each field describes the i-th quota. Lists of different
// lengths are paired as far as they go, and at most maxQuotas positions are
// read: a position makes a quota if it has a limit (from -Limit, else from
// -Policy) or a remaining count, and the quota takes whatever else its
// position holds. A Limit or Policy member that is not a number leaves its
// position without a limit; a Remaining, Reset, Reset-After or Used with a
// member that is not a plain number is no list, and only a Reset is then
// read, as a single value for the first quota (it may be a date, whose
// comma makes no list).
func (p *parser) xRateLimitLists(fs *fieldSet, out *Quotas) {
	var qs [maxQuotas]quotaState
	var skip [maxQuotas]bool // a policy in units other than requests
	n := listLimits(fs, &qs, &skip)
	var xs [maxQuotas]float64
	if v, ok := fs.joined(fXRemaining); ok {
		k := numberList(v, &xs)
		for i, x := range xs[:k] {
			if !math.IsInf(x, 0) {
				qs[i].remaining, qs[i].hasRemaining = x, true
			}
		}
		n = max(n, k)
	}
	if v, ok := fs.joined(fXUsed); ok {
		for i, used := range xs[:numberList(v, &xs)] {
			switch q := &qs[i]; {
			case math.IsInf(used, 0):
			case !q.hasLimit && q.hasRemaining:
				q.limit, q.hasLimit = q.remaining+used, true
			case q.hasLimit && !q.hasRemaining:
				q.remaining, q.hasRemaining = max(q.limit-used, 0), true
			}
		}
	}
	// Reset-After, being relative and immune to clock skew, wins over
	// Reset at its position, as xRateLimitWith has it.
	var after [maxQuotas]bool
	if v, ok := fs.joined(fXResetAfter); ok {
		for i, s := range xs[:numberList(v, &xs)] {
			qs[i].reset, after[i] = p.after(s), true
		}
	}
	if v, ok := fs.joined(fXReset); ok {
		if k := numberList(v, &xs); k > 0 {
			for i, s := range xs[:k] {
				if !after[i] {
					qs[i].reset, _ = p.resetNumber(s)
				}
			}
		} else if !after[0] {
			qs[0].reset, _ = p.reset(fs.first(fXReset))
		}
	}
	for i := range n {
		if !skip[i] {
			p.emit(&qs[i], out)
		}
	}
}

// numberList reads v as comma-separated plain decimals (`1, 1419704`), at
// most len(out) of them, into out and returns how many it read: 0 when a
// member is not a number, so that `Tue, 16 Jan 2024 16:00:00 GMT` is no
// list. A member too long for a float64 is +Inf, as ParseDecimal has it.
func numberList(v string, out *[maxQuotas]float64) int {
	n := 0
	for n < len(out) {
		m, rest, more := strings.Cut(v, ",")
		x, ok := ParseDecimal(m)
		if !ok {
			return 0
		}
		out[n] = x
		n++
		if !more {
			break
		}
		v = rest
	}
	return n
}
