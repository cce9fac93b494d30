package pacer

import (
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

// A response's print (see coast.go): what a response learnt in full said,
// and whether another says the same but for its Remaining figures.

const (
	// maxPrintFields caps the rate-limit fields a coasting response may
	// carry: 12 holds Anthropic's four quotas of three fields.
	maxPrintFields = 12
	// maxPrintCounts caps the Remaining figures in them: the quotas pacer
	// tracks per endpoint (maxWindows).
	maxPrintCounts = maxWindows
)

// fieldRole is how a field of a response may differ from the one learnt
// for the response to coast.
type fieldRole uint8

const (
	roleFixed  fieldRole = iota // the same value
	roleCount                   // a quota's Remaining: a count at or above its floor
	roleIgnore                  // a figure the parse does not read (GitHub's Used beside Limit and Remaining)
)

// steadyPrint is what a response learnt in full said, as the fields of its
// header: a response that matches it would parse to the same quotas but
// for their Remaining figures. Immutable once published, but for used and
// dead.
//
// A print is kept per limiter, so it holds only what it has (a server that
// states nothing has a print of a few words): a table of 10,000 endpoints
// must fit its memory bound (TestManyDistinctKeysStayWithinMemoryBound).
type steadyPrint struct {
	n      int          // header fields, rate-limit or not
	fields []printField // the rate-limit fields
	counts []printCount // their Remaining figures, in field order
	used   atomic.Bool  // a response coasted on it (see notePrint)
	dead   atomic.Bool  // a response failed to match it before any coasted
}

// printField is one rate-limit field of a print.
type printField struct {
	key  string // as in the header
	val  string // its value (roleFixed)
	role fieldRole
	// first is its figure's place in counts (roleCount).
	first int8
}

// printCount is one Remaining figure of a print.
type printCount struct {
	floor float64 // the lowest that may coast: coastFloor of the quota's limit
	quota string  // the quota's name, as the limiter knows it
}

// coasting is a response that coasts: the print it matched and the
// Remaining figures it stated (by the print's counts).
type coasting struct {
	p    *steadyPrint
	left [maxPrintCounts]float64
}

// newSteadyPrint returns h's print, or nil when its responses may not coast:
// a rate-limit field with several values or a Retry-After, a Remaining
// whose quota states no limit, more fields or figures than a print holds.
func newSteadyPrint(h http.Header) *steadyPrint {
	var fields [maxPrintFields]printField
	var kinds [maxPrintFields]field // what each field is, as classify found it
	nk := 0
	var at [numFields]int8 // the field's index in fields, plus one
	for k, vs := range h {
		f, ok := classify(k)
		if !ok {
			continue
		}
		if len(vs) != 1 || at[f] != 0 || nk == maxPrintFields {
			return nil // several values or spellings: parsed by preference
		}
		switch f {
		case fRetryAfter, fRetryAfterMs, fMsRetryAfterMs:
			return nil
		}
		fields[nk], kinds[nk] = printField{key: k, val: vs[0]}, f
		nk++
		at[f] = int8(nk)
	}
	if i := at[fXUsed]; i != 0 && at[fXLimit] != 0 && at[fXRemaining] != 0 {
		fields[i-1].role = roleIgnore
	}
	// Each Remaining figure, and the quota the parse gives that figure
	// (the first not taken, if several quotas state the same): its limit
	// sets the floor, its name is the window coasting lowers.
	var qs quotaBuf
	parseHeadersInto(h, time.Now(), 0, 0, &qs)
	quotas := qs.slice()
	taken := make([]bool, len(quotas))
	var counts []printCount
	count := func(left float64) bool {
		for k, q := range quotas {
			if !taken[k] && q.Remaining == left && q.Limit > 0 && len(counts) < maxPrintCounts {
				taken[k] = true
				counts = append(counts, printCount{floor: coastFloor * q.Limit, quota: q.Name})
				return true
			}
		}
		return false
	}
	for i := range nk {
		fd, f := &fields[i], kinds[i]
		fd.first = int8(len(counts))
		switch {
		case isRemaining(f):
			// Every Remaining field follows its limit's (headers_fields.go),
			// which must state a number: without one the parse derives the
			// limit from Remaining and Used, and a lower Remaining would
			// change it.
			left, ok := parseCount(fd.val)
			if !ok || at[f-1] == 0 || !isCount(fields[at[f-1]-1].val) || !count(left) {
				return nil
			}
			fd.role = roleCount
		}
	}
	return &steadyPrint{n: len(h), fields: slices.Clone(fields[:nk]), counts: counts}
}

// isRemaining reports whether f is a quota's Remaining figure.
func isRemaining(f field) bool {
	switch {
	case f == fXRemaining, f == fRLRemaining:
		return true
	case f >= fOpenAI && f < fAnthropic:
		return (f-fOpenAI)%3 == 1
	case f >= fAnthropic && f < fShopify:
		return (f-fAnthropic)%3 == 1
	}
	return false
}

// matches reports whether h says what p's response said but for Remaining
// figures at or above their floors. The header's size and p's fields found
// by key stand for the whole header: a field added in place of another
// would have to be one that changes nothing. left, if not nil, receives
// the Remaining figures, by p's counts.
func (p *steadyPrint) matches(h http.Header, left *[maxPrintCounts]float64) bool {
	if len(h) != p.n {
		return false
	}
	for i := range p.fields {
		fd := &p.fields[i]
		if fd.role == roleIgnore {
			continue // the parse does not read it: not even whether it is there
		}
		vs := h[fd.key]
		if len(vs) != 1 {
			return false
		}
		switch fd.role {
		case roleFixed:
			if vs[0] != fd.val {
				return false
			}
		case roleCount:
			c := int(fd.first)
			v, ok := parseCount(vs[0])
			if !ok || v < p.counts[c].floor {
				return false
			}
			if left != nil {
				left[c] = v
			}
		}
	}
	return true
}
