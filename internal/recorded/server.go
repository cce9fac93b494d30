package recorded

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Latencies are the round trips a session is replayed at: none, a nearby
// API's and a distant one's. A Server takes one to answer, and each
// request is sent that long before its response's Date.
var Latencies = []time.Duration{0, 50 * time.Millisecond, 400 * time.Millisecond}

// undatedGap is the pace of a session that records no times: about the
// gaps a test suite's calls to a local server show (Mastodon's resets carry
// the request's microseconds, 60 to 130 ms apart).
const undatedGap = 100 * time.Millisecond

// Start is the time the session's clock reads when its first request is
// sent at round trip lat: lat before its first response's Date; for a session that
// records no Date, the earliest reset a reading states less the time to it
// where both are known, else the earliest absolute reset less a minute,
// else noon of the first of January 2025 (nothing in such a session is
// absolute, so any time will do).
func (s *Session) Start(lat time.Duration) time.Time {
	for _, r := range s.Responses {
		if !r.Date.IsZero() {
			return r.Date.Add(-lat)
		}
	}
	var earliest time.Time
	for _, r := range s.Responses {
		for _, f := range r.Want.Quotas {
			if f.ResetAt.IsZero() {
				continue
			}
			if f.ResetAfter > 0 {
				return f.ResetAt.Add(-time.Duration(f.ResetAfter * float64(time.Second))).Add(-lat)
			}
			if earliest.IsZero() || f.ResetAt.Before(earliest) {
				earliest = f.ResetAt
			}
		}
	}
	if !earliest.IsZero() {
		return earliest.Add(-time.Minute)
	}
	return time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
}

// Schedule is when each request of the session was sent at round trip lat,
// from Start: by the recorded Dates (lat before each), or undatedGap apart
// where a response records none. Times never go back: a response dated
// before its predecessor (a second key recorded earlier) is sent with it.
func (s *Session) Schedule(lat time.Duration) []time.Duration {
	start := s.Start(lat)
	out := make([]time.Duration, len(s.Responses))
	var last time.Duration
	for i, r := range s.Responses {
		at := last + undatedGap
		if i == 0 {
			at = 0
		}
		if !r.Date.IsZero() {
			at = max(r.Date.Add(-lat).Sub(start), last)
		}
		out[i], last = at, at
	}
	return out
}

// Server answers a session's requests with its recorded responses, in
// order, each its round trip after the request arrives. It is an
// http.RoundTripper, safe for concurrent use; it records when each request
// arrived.
type Server struct {
	s   *Session
	lat time.Duration

	mu      sync.Mutex
	next    int
	arrived []time.Time
}

// NewServer returns a Server of s that answers after lat.
func NewServer(s *Session, lat time.Duration) *Server { return &Server{s: s, lat: lat} }

// RoundTrip answers req with the next recorded response: an error once
// every response is served, or when req's method is not the one recorded.
func (srv *Server) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	srv.mu.Lock()
	i := srv.next
	if i >= len(srv.s.Responses) {
		srv.mu.Unlock()
		return nil, fmt.Errorf("recorded: %s: request %d (%s %s) beyond the %d recorded", srv.s.Name(), i, req.Method, req.URL, len(srv.s.Responses))
	}
	srv.next++
	srv.arrived = append(srv.arrived, time.Now())
	srv.mu.Unlock()
	r := &srv.s.Responses[i]
	if req.Method != r.Method {
		return nil, fmt.Errorf("recorded: %s: request %d is %s, recorded %s", srv.s.Name(), i, req.Method, r.Method)
	}
	if srv.lat > 0 {
		select {
		case <-time.After(srv.lat):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return r.HTTP(req), nil
}

// HTTP is r as the response to req, with a body of its own.
func (r *Response) HTTP(req *http.Request) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", r.Status, http.StatusText(r.Status)),
		StatusCode:    r.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        r.Header.Clone(),
		Body:          io.NopCloser(strings.NewReader(r.Body)),
		ContentLength: int64(len(r.Body)),
		Request:       req,
	}
}

// Arrived returns when each request served so far arrived.
func (srv *Server) Arrived() []time.Time {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return append([]time.Time(nil), srv.arrived...)
}

// Skip passes over the next recorded response, for a request that was
// never sent (refused before it left the client): the response after it
// answers the request after it. Its arrival is recorded as zero.
func (srv *Server) Skip() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.next < len(srv.s.Responses) {
		srv.next++
		srv.arrived = append(srv.arrived, time.Time{})
	}
}
