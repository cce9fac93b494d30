package response

import (
	"bytes"
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/header"
)

// What a refusal's body states, by the conventions of the package doc: its
// error object read (bodyFacts.read), then applied to the Meaning its
// headers began (bodyReader). Everything here runs for a 403's or a 429's
// peeked prefix, or a stream's first event, never for another response.

// bodyFacts is what an error object states, as written.
type bodyFacts struct {
	message  []byte // the error's message
	code     int    // the error's code, a number or a string of digits; 0 if none
	codeText []byte // the error's code when it is a word (OpenAI's "rate_limit_exceeded")
	status   []byte // google.rpc.Status's status ("RESOURCE_EXHAUSTED")
	typ      []byte // the error's type (Anthropic's "rate_limit_error")
	provider []byte // OpenRouter's metadata.provider_name: the upstream that refused
	headers  []byte // OpenRouter's metadata.headers, an object
	details  []byte // google.rpc.Status's details, an array
	// retryAfter is Discord's retry_after, in seconds; -1 if none.
	retryAfter float64
	global     bool // Discord's "global": true
}

// read reads b, a JSON text's prefix: an object whose members, or those of
// its "error" object, state the error (OpenAI, Groq, Google, OpenRouter,
// Anthropic wrap it; Discord and OpenRouter's forwarded errors do not), or
// an array of such objects (Google's REST streaming), of which the first.
func (f *bodyFacts) read(b []byte) {
	f.retryAfter = -1
	if b = skipSpace(b); len(b) > 0 && b[0] == '[' {
		elements(b, func(v []byte) bool {
			b = v
			return false
		})
	}
	f.fields(b, true)
}

// fields reads the members of obj, the body's object (top) or its error.
func (f *bodyFacts) fields(obj []byte, top bool) {
	members(obj, func(k, v []byte) bool {
		switch string(k) {
		case "error":
			if top {
				f.fields(v, false)
			}
		case "message":
			f.message, _ = str(v)
		case "code":
			f.readCode(v)
		case "status":
			f.status, _ = str(v)
		case "type":
			// Anthropic's envelope says "type":"error" beside the error,
			// whose own type is the one that tells.
			if s, ok := str(v); ok && (!top || string(s) != "error") {
				f.typ = s
			}
		case "details":
			f.details = v
		case "metadata":
			members(v, func(k, v []byte) bool {
				switch string(k) {
				case "headers":
					f.headers = v
				case "provider_name":
					f.provider, _ = str(v)
				}
				return true
			})
		case "retry_after":
			if s, ok := header.ParseDecimal(string(v)); ok {
				f.retryAfter = s
			}
		case "global":
			f.global = string(v) == "true"
		}
		return true
	})
}

// readCode reads an error's code: 429, "429" or "rate_limit_exceeded".
func (f *bodyFacts) readCode(v []byte) {
	s, quoted := str(v)
	if !quoted {
		s = v
	}
	if n, ok := header.ParseDecimal(string(s)); ok && n < 1000 && n == float64(int(n)) {
		f.code = int(n)
	} else if quoted {
		f.codeText = s
	}
}

// refusalStatus is the status a stream's in-band error stands for: its code
// when that is a refusal's (429, 503, Anthropic's 529), Google's
// RESOURCE_EXHAUSTED (429) and UNAVAILABLE (503), OpenAI's
// rate_limit_exceeded and Anthropic's rate_limit_error (429) and
// overloaded_error (529); 0 for anything else.
func (f *bodyFacts) refusalStatus() int {
	switch f.code {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, StatusOverloaded:
		return f.code
	}
	switch {
	case string(f.status) == "RESOURCE_EXHAUSTED", string(f.typ) == "rate_limit_error",
		string(f.codeText) == "rate_limit_exceeded", string(f.typ) == "rate_limit_exceeded":
		return http.StatusTooManyRequests
	case string(f.status) == "UNAVAILABLE":
		return http.StatusServiceUnavailable
	case string(f.typ) == "overloaded_error":
		return StatusOverloaded
	}
	return 0
}

// bodyReader applies what a body states to the Meaning its headers began.
// The Meaning's quotas go to its methods as a parameter, not in a field:
// escape analysis does not tell a struct's fields apart, and the times
// these methods hand out would take the caller's Meaning to the heap with
// them (an allocation per request through the Transport, every response).
type bodyReader struct {
	now  time.Time
	caps header.Caps
	clk  *Clock // nil: the server's clock is ours
	nh   int    // how many of m's quotas the headers stated
	wait float64
	sig  Signal
}

// readBody reads b, a refusal's body (its peeked prefix) or a stream's
// first event, into m, whose status and headers are read: the body's
// signal, its quotas, its wait (the larger of the headers' and the body's),
// and Discord's global flag. f is b's error object, read.
func readBody(m *Meaning, b []byte, f *bodyFacts, now time.Time, caps header.Caps, clk *Clock) {
	m.Body = Classify(b)
	r := bodyReader{now: now, caps: caps, clk: clk, nh: m.Quotas.Len(), wait: -1}
	qs := &m.Quotas
	if f.details != nil {
		r.google(qs, f.details)
	}
	name := limitName(f.message)
	if f.headers != nil {
		r.forwarded(qs, f.headers, name)
	} else if name != nil {
		r.namedLimit(qs, name)
	}
	if f.message != nil {
		r.rateMessage(qs, f.message)
	}
	if f.retryAfter >= 0 {
		r.wait = max(r.wait, f.retryAfter)
	}
	if r.sig == None && len(f.provider) > 0 && string(bytes.TrimSpace(f.message)) == "Provider returned error" {
		r.sig = Upstream
	}
	if m.Body == None {
		m.Body = r.sig
	}
	if r.wait >= 0 {
		m.RetryAfter = max(m.RetryAfter, header.ClampSeconds(r.wait, caps.Wait))
	}
	if m.Body == TooLarge {
		// No wait makes the request fit: the wait its refusal names (the
		// time the quota takes to hold it all) is none to keep to.
		m.RetryAfter = 0
	}
	m.Global = m.Global || f.global
}

// serverNow is now in the server's clock.
func (r *bodyReader) serverNow() time.Time {
	if r.clk == nil {
		return r.now
	}
	return r.now.Add(r.clk.Offset(r.now))
}

// resetAfter is the reset s seconds from now, within the reset cap.
func (r *bodyReader) resetAfter(s float64) time.Time {
	return r.now.Add(header.ClampSeconds(s, r.resetCap()))
}

// resetAt is the reset at t in the server's clock, moved into ours: a past
// one is now; one further than the reset cap either way is none (a broken
// date, not a window), as the grammar reads absolute resets.
func (r *bodyReader) resetAt(t time.Time) (time.Time, bool) {
	d := t.Sub(r.serverNow())
	if d > r.resetCap() || d < -r.resetCap() {
		return time.Time{}, false
	}
	return r.now.Add(max(d, 0)), true
}

func (r *bodyReader) resetCap() time.Duration { return max(r.caps.Reset, r.caps.Wait) }

// add puts q, a quota the body states, into the Meaning's quotas: merged
// into one of the same name (what that one leaves unknown taken from q);
// dropped when a quota the headers state has its unit and its limit (the
// same quota, which the headers describe at the same instant); else
// appended, unless the Meaning holds as many as a response keeps.
func (r *bodyReader) add(qs *header.Quotas, q *header.Quota) {
	for i := range qs.Len() {
		e := qs.At(i)
		switch {
		case e.Name == q.Name:
			if e.Limit == 0 {
				e.Limit = q.Limit
			}
			if e.Remaining < 0 {
				e.Remaining = q.Remaining
			}
			if e.Limit > 0 {
				e.Remaining = min(e.Remaining, e.Limit)
			}
			if e.Reset.IsZero() {
				e.Reset = q.Reset
			}
			if e.Window == 0 {
				e.Window = q.Window
			}
			return
		case i < r.nh && q.Limit > 0 && e.Limit == q.Limit && e.Unit == q.Unit:
			return
		}
	}
	if p := qs.Append(); p != nil {
		*p = *q
	}
}

// quotaName is b as a quota's name: at most 256 visible ASCII characters
// and no quote or backslash (a name as written, with no escape); "" for
// anything else.
func quotaName(b []byte) string {
	if len(b) > 256 {
		return ""
	}
	for _, c := range b {
		if c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return ""
		}
	}
	return string(b)
}
