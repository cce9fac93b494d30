package apisim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"
)

// ServeHTTP answers any method and path: it counts the request against the
// path's bucket, sleeps Latency (returning early, without writing, when the
// client goes away), then writes 200 or 429 with the style's headers and a
// small JSON body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp := s.render(s.admit(r.URL.Path, usageOf(r.Header)))
	if err := sleep(r.Context(), s.cfg.Latency); err != nil {
		return
	}
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(resp.body)))
	w.WriteHeader(resp.status)
	w.Write(resp.body)
}

// Transport returns an in-memory http.RoundTripper served by s: no sockets, no
// goroutines. It reads and closes the request body, returns the context's
// error if the request's context ends before or during Latency (the request is
// then already counted if it had been admitted, as a real server would), and
// otherwise a response whose body the caller must close. Safe for concurrent use.
func (s *Server) Transport() http.RoundTripper { return transport{s} }

type transport struct{ s *Server }

// consume reads and closes the request's body, as a server does, and
// returns the request context's error if it has ended.
func consume(req *http.Request) error {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return req.Context().Err()
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := consume(req); err != nil {
		return nil, err
	}
	ctx := req.Context()
	r := t.s.render(t.s.admit(req.URL.Path, usageOf(req.Header)))
	if err := sleep(ctx, t.s.cfg.Latency); err != nil {
		return nil, err
	}
	return &http.Response{
		Status:        strconv.Itoa(r.status) + " " + http.StatusText(r.status),
		StatusCode:    r.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        r.header,
		Body:          io.NopCloser(bytes.NewReader(r.body)),
		ContentLength: int64(len(r.body)),
		Request:       req,
	}, nil
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d): // collected when unfired, since Go 1.23
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
