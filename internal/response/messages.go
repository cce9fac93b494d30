package response

import (
	"bytes"
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/header"
)

// The limits error messages state in words: OpenAI's rate-limit message,
// which Groq's OpenAI-compatible API sends too, and OpenRouter's, whose
// limits come forwarded as headers inside the body or named in the message.

// rateKind is a limit an OpenAI-style message names by abbreviation
// (https://console.groq.com/docs/rate-limits: RPM, RPD, TPM, TPD, ASH, ASD,
// ITPM, OTPM; https://platform.openai.com/docs/guides/rate-limits: RPM,
// RPD, TPM, TPD, IPM). Audio seconds and images count as tokens do: a
// request takes its cost.
type rateKind struct {
	abbr, name string
	unit       header.Unit
	window     time.Duration
}

var rateKinds = [...]rateKind{
	{"RPM", "requests-per-minute", header.Requests, time.Minute},
	{"RPD", "requests-per-day", header.Requests, 24 * time.Hour},
	{"TPM", "tokens-per-minute", header.Tokens, time.Minute},
	{"TPD", "tokens-per-day", header.Tokens, 24 * time.Hour},
	{"ITPM", "input-tokens-per-minute", header.Tokens, time.Minute},
	{"OTPM", "output-tokens-per-minute", header.Tokens, time.Minute},
	{"ASH", "audio-seconds-per-hour", header.Tokens, time.Hour},
	{"ASD", "audio-seconds-per-day", header.Tokens, 24 * time.Hour},
	{"IPM", "images-per-minute", header.Tokens, time.Minute},
}

// kindOf is the rate kind abbr abbreviates, in any case.
func kindOf(abbr []byte) (rateKind, bool) {
	for _, k := range rateKinds {
		if equalFold(abbr, k.abbr) {
			return k, true
		}
	}
	return rateKind{}, false
}

// rateMessage reads the limit and the wait an OpenAI-style rate-limit
// message states:
//
//	Rate limit reached for model `gemma2-9b-it` in organization `org_…` on
//	tokens per minute (TPM): Limit 15000, Used 11972, Requested 4351.
//	Please try again in 5.289s. Visit https://console.groq.com/docs/rate-limits …
//
// The quota is the abbreviation's (a window, a unit), Limit as stated,
// Remaining the Limit less what is Used; the wait is "try again in" (or
// Gemini's "Please retry in"), a Go duration. A request larger than the whole limit ("Requested ~12903"
// against "Limit 7000": "~" marks the server's estimate) never fits: the
// body says TooLarge.
func (r *bodyReader) rateMessage(qs *header.Quotas, msg []byte) {
	for _, lead := range [...]string{"try again in ", "retry in "} {
		if i := bytes.Index(msg, []byte(lead)); i >= 0 {
			if s, ok := goDuration(msg[i+len(lead):]); ok {
				r.wait = max(r.wait, s)
			}
		}
	}
	const limitWord = "): Limit "
	i := bytes.Index(msg, []byte(limitWord))
	if i < 0 {
		return
	}
	open := bytes.LastIndexByte(msg[:i], '(')
	if open < 0 {
		return
	}
	kind, ok := kindOf(msg[open+1 : i])
	if !ok {
		return
	}
	rest := msg[i+len(limitWord):]
	limit, rest, ok := leadingNumber(rest)
	if !ok || limit == 0 {
		return
	}
	q := header.Quota{Name: kind.name, Limit: limit, Remaining: -1, Window: kind.window, Unit: kind.unit}
	if after, ok := bytes.CutPrefix(rest, []byte(", Used ")); ok {
		if used, after, ok := leadingNumber(after); ok {
			q.Remaining, rest = min(max(limit-used, 0), limit), after
		}
	}
	if after, ok := bytes.CutPrefix(rest, []byte(", Requested ")); ok {
		if asked, _, ok := leadingNumber(bytes.TrimPrefix(after, []byte("~"))); ok && asked > limit {
			r.sig = TooLarge
		}
	}
	r.add(qs, &q)
}

// leadingNumber reads the plain decimal number b starts with, and what
// follows it. A number with a thousands separator ("15,000") is none.
func leadingNumber(b []byte) (float64, []byte, bool) {
	n := 0
	for n < len(b) && (isDigit(b[n]) || b[n] == '.' && n > 0) {
		n++
	}
	if n < len(b) && b[n] == ',' && n+1 < len(b) && isDigit(b[n+1]) {
		return 0, b, false
	}
	v, ok := header.ParseDecimal(string(bytes.TrimSuffix(b[:n], []byte("."))))
	if !ok || v > 1e15 {
		return 0, b, false
	}
	return v, b[n:], true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// goDuration reads the Go duration b starts with ("5.289s", "1m2.5s",
// "50.597142857s", "2ms", "1h0m0s": decimal numbers each with a unit, h,
// m, s, ms, us, µs or ns), in seconds; what follows it (". Visit …") is
// not read. False when b starts with none.
func goDuration(b []byte) (float64, bool) {
	total, parts := 0.0, 0
	for len(b) > 0 && isDigit(b[0]) {
		n := 0
		for n < len(b) && (isDigit(b[n]) || b[n] == '.') {
			n++
		}
		v, ok := header.ParseDecimal(string(b[:n]))
		if !ok {
			return 0, false
		}
		b = b[n:]
		unit := 0.0
		for _, u := range [...]struct {
			name string
			secs float64
		}{{"ms", 1e-3}, {"us", 1e-6}, {"µs", 1e-6}, {"μs", 1e-6}, {"ns", 1e-9}, {"h", 3600}, {"m", 60}, {"s", 1}} {
			if rest, ok := bytes.CutPrefix(b, []byte(u.name)); ok {
				unit, b = u.secs, rest
				break
			}
		}
		if unit == 0 {
			return 0, false
		}
		total += v * unit
		parts++
	}
	return total, parts > 0
}

// limitName is the limit OpenRouter names in its message, "Rate limit
// exceeded: free-models-per-day-high-balance." (its word up to a space, a
// final period dropped); nil when there is none.
func limitName(msg []byte) []byte {
	const lead = "Rate limit exceeded: "
	i := bytes.Index(msg, []byte(lead))
	if i < 0 {
		return nil
	}
	name := msg[i+len(lead):]
	if end := bytes.IndexByte(name, ' '); end >= 0 {
		name = name[:end]
	}
	name = bytes.TrimRight(name, ".")
	if quotaName(name) == "" {
		return nil
	}
	return name
}

// namedLimit reads a limit OpenRouter names in its message with no figure
// beside it (its daily caps: "free-models-per-day", "Rate limit exceeded:
// free-models-per-day-high-balance", https://openrouter.ai/docs/api-reference/limits):
// a spent quota of the window its name states, with no reset (OpenRouter
// documents none). A name that states no window says nothing usable.
func (r *bodyReader) namedLimit(qs *header.Quotas, name []byte) {
	q := header.Quota{Name: quotaName(name), Window: windowOf(name)}
	if q.Window == 0 {
		return
	}
	if k, ok := kindIn(name); ok {
		q.Unit = k.unit
	} else if countsTokens(name) {
		q.Unit = header.Tokens
	}
	r.add(qs, &q)
}

// forwarded reads the headers OpenRouter forwards inside its error
// (error.metadata.headers: {"X-RateLimit-Limit":"8","X-RateLimit-Remaining":"0",
// "X-RateLimit-Reset":"1783519380000"}, or an upstream's "Retry-After"), by
// the header grammar, so that every convention's rules hold (the reset is
// an epoch in milliseconds there). Their quota, unnamed by the headers,
// takes the name and window the message gives it (limitName). A Date among
// them is dropped: the clock's offset is learnt from the response's own.
func (r *bodyReader) forwarded(qs *header.Quotas, headers, name []byte) {
	h := make(http.Header, 4)
	members(headers, func(k, v []byte) bool {
		s, ok := str(v)
		if key := quotaName(k); ok && key != "" && len(s) <= 256 && !bytes.ContainsAny(s, "\\\r\n") && !equalFold(k, "date") {
			h[key] = []string{string(s)}
		}
		return len(h) < 16
	})
	var fq header.Quotas
	var skew header.Skew
	if r.clk != nil {
		skew = r.clk
	}
	info, _ := header.Parse(h, r.now, r.caps, skew, &fq)
	if info.RetryAfter > 0 {
		r.wait = max(r.wait, info.RetryAfter.Seconds())
	}
	for i := range fq.Len() {
		q := fq.At(i)
		if q.Name == "" && fq.Len() == 1 && name != nil {
			q.Name = quotaName(name)
			if q.Window == 0 {
				q.Window = windowOf(name)
			}
		}
		r.add(qs, q)
	}
}

// windowOf is the window a limit's name states: "per", a separator at
// most, a count at most and a unit (Google's quota ids,
// GenerateRequestsPerDayPerProjectPerModel, ReadRequestsPer100SecondsPerUser;
// OpenRouter's free-models-per-day), else an abbreviation among its words
// (OpenRouter's limit_rpm/…); 0 when it states none.
func windowOf(name []byte) time.Duration {
	for i := 0; i+3 <= len(name); i++ {
		if !equalFold(name[i:i+3], "per") {
			continue
		}
		rest := name[i+3:]
		if len(rest) > 0 && (rest[0] == '-' || rest[0] == '_') {
			rest = rest[1:]
		}
		count := 0
		for len(rest) > 0 && isDigit(rest[0]) && count < 1e6 {
			count, rest = 10*count+int(rest[0]-'0'), rest[1:]
		}
		count = max(count, 1)
		for _, u := range [...]struct {
			word string
			d    time.Duration
		}{{"second", time.Second}, {"minute", time.Minute}, {"hour", time.Hour}, {"day", 24 * time.Hour}} {
			if len(rest) >= len(u.word) && equalFold(rest[:len(u.word)], u.word) {
				return time.Duration(count) * u.d
			}
		}
	}
	if k, ok := kindIn(name); ok {
		return k.window
	}
	return 0
}

// kindIn is the rate kind an abbreviation among name's words (runs of
// letters and digits) names, if one does.
func kindIn(name []byte) (rateKind, bool) {
	for len(name) > 0 {
		n := 0
		for n < len(name) && (isDigit(name[n]) || isLetter(name[n])) {
			n++
		}
		if k, ok := kindOf(name[:n]); ok {
			return k, true
		}
		name = name[min(n+1, len(name)):]
	}
	return rateKind{}, false
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// indexFold is the index of s, ASCII, in b, letters matched in any case;
// -1 if it is not there.
func indexFold(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		j := 0
		for j < len(s) && b[i+j]|0x20 == s[j]|0x20 && (isLetter(s[j]) || b[i+j] == s[j]) {
			j++
		}
		if j == len(s) {
			return i
		}
	}
	return -1
}

// equalFold reports whether b is s, ASCII, letters matched in any case.
func equalFold(b []byte, s string) bool { return len(b) == len(s) && indexFold(b, s) == 0 }
