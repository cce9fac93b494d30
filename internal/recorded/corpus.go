// Package recorded serves sessions recorded from real APIs again, at their
// recorded pace, so that tests can hold pacer to what real servers sent
// rather than to what a simulator this project wrote sends.
//
// A session is a list of responses one client received from one provider,
// in order, each with the method and URL of its request, its status, its
// headers and (where it mattered) its body, together with what the
// provider's documentation says each response states: every quota's limit,
// remaining count, reset and window, the wait it asks for, and whether it
// refused the request. [Load] reads a corpus of them; [Server] answers a
// session's requests with its responses, in order.
//
// The corpus pacer is tested against is ../shared/data/real_headers.json:
// cassettes and issue reports from other people's public repositories. It
// is not the project's to copy, so it is read from there ([Find]) and never
// committed; the project's own sessions, written from providers'
// documentation where the corpus is thin, are in testdata and say so.
package recorded

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Session is one recorded session.
type Session struct {
	// Index is the session's place in its corpus, from 0.
	Index int
	// Set names the corpus the session is from when it is not the shared
	// one of recordings ("docs" for the sessions written from providers'
	// documentation); "" for the shared corpus.
	Set string
	// Provider names the API ("github", "x", "strava").
	Provider string
	// Source says where the recording comes from (repository:path@commit,
	// or an issue).
	Source string
	// Kind is "recorded-cassette", "issue-log" and the like.
	Kind string
	// Notes and Summary are the corpus's words on the session.
	Notes, Summary string
	// Uncertain lists what the corpus could not establish.
	Uncertain []string
	// Responses are the session's responses, in the order received.
	Responses []Response
}

// Name is a short name for the session: its set, index and provider.
func (s *Session) Name() string {
	if s.Set != "" {
		return fmt.Sprintf("%s-%02d-%s", s.Set, s.Index, s.Provider)
	}
	return fmt.Sprintf("%02d-%s", s.Index, s.Provider)
}

// Response is one recorded response, with the request it answered and what
// it states as its provider documents it.
type Response struct {
	Method string
	// URL is the request's URL; a recording that did not give it whole
	// ("https://api.example.com/... (not stated)") has what it gave, with
	// anything after the first space dropped.
	URL    string
	Status int // 200 where the recording does not say
	// StatusKnown is false where the recording does not say: whether the
	// server refused the request cannot be judged by it then.
	StatusKnown bool
	Header      http.Header
	Body        string
	// Date is when the server sent the response, from its Date header (or
	// a provider's own timestamp field); zero when the recording has none.
	Date time.Time
	// Want is what the response states.
	Want Reading
}

// Reading is what one response states of the rate limit.
type Reading struct {
	// Quotas are the quotas stated (in headers or, where the provider
	// puts them there, in the body).
	Quotas []Figure
	// RetryAfter is the wait the server asks for, in seconds; negative
	// when it asks for none (a Retry-After on a 2xx asks for nothing).
	RetryAfter float64
	// Throttled reports that the server refused the request for a reason
	// it may lift later.
	Throttled bool
	// InBody reports that what the response states is in its body, not
	// its headers.
	InBody bool
	// NeverSatisfiable reports a refusal of a request larger than the
	// whole limit: no wait makes it fit.
	NeverSatisfiable bool
}

// Figure is one quota as the provider documents it. Unknown numbers are
// negative, unknown times zero.
type Figure struct {
	Name string
	// Unit is "requests", "tokens", "points", "percent"…
	Unit string
	// Limit is stated or, where the corpus says so, derived (Used plus
	// Remaining); LimitDerived tells which.
	Limit        float64
	LimitDerived bool
	Remaining    float64
	Used         float64
	// ResetAt is the absolute reset; ResetAfter the seconds from the
	// response to it (negative when unknown: a reset already past is 0 by
	// then). Either may be known without the other.
	ResetAt    time.Time
	ResetAfter float64
	HasReset   bool
	// Window is the window length in seconds; negative when unknown.
	Window float64
}

// Find returns the path of the shared corpus, ../shared/data/
// real_headers.json beside the module's root (the directory holding
// go.mod, found from the working directory up), or the path in
// PACER_REPLAY_CORPUS when set. ok is false when there is no such file.
func Find() (path string, ok bool) {
	if p := os.Getenv("PACER_REPLAY_CORPUS"); p != "" {
		_, err := os.Stat(p)
		return p, err == nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
	p := filepath.Join(filepath.Dir(dir), "shared", "data", "real_headers.json")
	_, err = os.Stat(p)
	return p, err == nil
}

// Load reads the sessions of the corpus at path; set names it (see
// Session.Set).
func Load(path, set string) ([]*Session, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw []rawSession
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("recorded: %s: %w", path, err)
	}
	out := make([]*Session, len(raw))
	for i := range raw {
		s, err := raw[i].session(i)
		if err != nil {
			return nil, fmt.Errorf("recorded: %s: session %d (%s): %w", path, i, raw[i].Provider, err)
		}
		s.Set = set
		out[i] = s
	}
	return out, nil
}

// rawSession is a session as the corpus's JSON holds it.
type rawSession struct {
	Provider   string        `json:"provider"`
	Source     string        `json:"source"`
	SourceKind string        `json:"source_kind"`
	Notes      string        `json:"notes"`
	Uncertain  []string      `json:"uncertain"`
	Responses  []rawResponse `json:"responses"`
	Expected   struct {
		PerResponse []json.RawMessage `json:"per_response"`
		Summary     string            `json:"summary"`
	} `json:"expected"`
}

type rawResponse struct {
	Status  *int                `json:"status"`
	Method  string              `json:"method"`
	URL     string              `json:"url"`
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"`
}

func (r *rawSession) session(i int) (*Session, error) {
	s := &Session{Index: i, Provider: r.Provider, Source: r.Source, Kind: r.SourceKind,
		Notes: r.Notes, Summary: r.Expected.Summary, Uncertain: r.Uncertain}
	if len(r.Expected.PerResponse) != len(r.Responses) {
		return nil, fmt.Errorf("%d responses, %d readings", len(r.Responses), len(r.Expected.PerResponse))
	}
	for j, rr := range r.Responses {
		resp := Response{Method: rr.Method, URL: cleanURL(rr.URL), Status: http.StatusOK,
			Header: http.Header(rr.Headers), Body: rr.Body}
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
		if rr.Status != nil {
			resp.Status, resp.StatusKnown = *rr.Status, true
		}
		if resp.Method == "" {
			resp.Method = http.MethodGet
		}
		resp.Date = dateOf(resp.Header)
		w, err := reading(r.Expected.PerResponse[j])
		if err != nil {
			return nil, fmt.Errorf("response %d: %w", j, err)
		}
		resp.Want = w
		s.Responses = append(s.Responses, resp)
	}
	return s, nil
}

// cleanURL keeps what a recording gave of a URL: up to the first space, and
// a placeholder host where it gave none.
func cleanURL(u string) string {
	u, _, _ = strings.Cut(strings.TrimSpace(u), " ")
	if p, err := url.Parse(u); err != nil || p.Host == "" {
		return "https://unstated.invalid/"
	}
	return u
}

// dateOf is the time a response was sent, from its Date header (RFC 9110's
// forms, or "UTC" in place of "GMT" as X sends it), else Amazon MWS's
// x-mws-timestamp; zero if neither parses.
func dateOf(h http.Header) time.Time {
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		switch strings.ToLower(k) {
		case "date":
			v := strings.Replace(vs[0], " UTC", " GMT", 1)
			if t, err := http.ParseTime(v); err == nil {
				return t
			}
		case "x-mws-timestamp":
			if t, err := time.Parse(time.RFC3339Nano, vs[0]); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// rawFigure is one quota of a reading as the corpus holds it; the fields of
// a reading (throttled, retry_after_s) sit beside a single quota's.
type rawFigure struct {
	Quota             *string  `json:"quota"`
	Unit              *string  `json:"unit"`
	Limit             *float64 `json:"limit"`
	LimitDerived      *float64 `json:"limit_derived"`
	Remaining         *float64 `json:"remaining"`
	Used              *float64 `json:"used"`
	ResetAt           *string  `json:"reset_at"`
	ResetAfter        *float64 `json:"reset_after_s"`
	Window            *float64 `json:"window_s"`
	RetryAfter        *float64 `json:"retry_after_s"`
	RetryAfterApplies *bool    `json:"retry_after_applies"`
	BodyRetryAfter    *float64 `json:"body_retry_after_s"`
	NeverSatisfiable  bool     `json:"never_satisfiable"`
	RetrySource       string   `json:"retry_source"`
	Throttled         bool     `json:"throttled"`
}

// reading normalises the corpus's three shapes of a response's reading: a
// quota with the reading's fields beside it, a list of quotas, or the
// reading's fields with a list under "quotas".
func reading(msg json.RawMessage) (Reading, error) {
	w := Reading{RetryAfter: -1}
	var figs []rawFigure
	var top rawFigure
	switch {
	case len(msg) > 0 && msg[0] == '[':
		if err := json.Unmarshal(msg, &figs); err != nil {
			return w, err
		}
	default:
		var withList struct {
			Quotas []rawFigure `json:"quotas"`
		}
		if err := json.Unmarshal(msg, &withList); err != nil {
			return w, err
		}
		if err := json.Unmarshal(msg, &top); err != nil {
			return w, err
		}
		figs = withList.Quotas
		if figs == nil {
			figs = []rawFigure{top}
		}
	}
	for _, f := range append(figs, top) {
		w.Throttled = w.Throttled || f.Throttled
		if f.RetryAfter != nil && (f.RetryAfterApplies == nil || *f.RetryAfterApplies) {
			w.RetryAfter = *f.RetryAfter
		}
		if f.BodyRetryAfter != nil {
			// A wait the body states beside the headers' (Discord's
			// retry_after): the larger of the two is the one asked for.
			w.RetryAfter = max(w.RetryAfter, *f.BodyRetryAfter)
		}
		w.NeverSatisfiable = w.NeverSatisfiable || f.NeverSatisfiable
		if strings.Contains(f.RetrySource, "body") {
			w.InBody = true
		}
	}
	for _, f := range figs {
		if fig, ok := f.figure(); ok {
			w.Quotas = append(w.Quotas, fig)
		}
	}
	return w, nil
}

// figure is f as a Figure; false when f states no count (a reading with no
// quota, or a quota named with nothing known of it).
func (f *rawFigure) figure() (Figure, bool) {
	if f.Limit == nil && f.LimitDerived == nil && f.Remaining == nil && f.Used == nil {
		return Figure{}, false
	}
	fig := Figure{Limit: -1, Remaining: -1, Used: -1, ResetAfter: -1, Window: -1}
	if f.Quota != nil {
		fig.Name = *f.Quota
	}
	if f.Unit != nil {
		fig.Unit = *f.Unit
	}
	switch {
	case f.Limit != nil:
		fig.Limit = *f.Limit
	case f.LimitDerived != nil:
		fig.Limit, fig.LimitDerived = *f.LimitDerived, true
	}
	set := func(dst *float64, src *float64) {
		if src != nil {
			*dst = *src
		}
	}
	set(&fig.Remaining, f.Remaining)
	set(&fig.Used, f.Used)
	set(&fig.Window, f.Window)
	if f.ResetAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *f.ResetAt); err == nil {
			fig.ResetAt, fig.HasReset = t, true
		}
	}
	if f.ResetAfter != nil {
		fig.ResetAfter, fig.HasReset = max(*f.ResetAfter, 0), true
	}
	return fig, true
}
