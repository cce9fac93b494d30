package apisim

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"
)

// ConcurrencyConfig describes a server whose capacity is concurrent work,
// not a rate: it serves Knee requests at once in Latency each, and beyond
// that it queues: with n requests in progress (the new one included), a
// request takes Latency × n/Knee, so throughput stays Knee/Latency however
// many are sent, and only latency grows. Above Ceiling requests in
// progress it sheds: the request is answered 503 (or Shed's status) at
// once, not served. That is the shape of a fixed pool of workers with a
// queue in front (LLM APIs, databases behind an API) and of a load
// balancer that sheds when the queue is too long.
type ConcurrencyConfig struct {
	// Latency is the service time of a request while at most Knee are in
	// progress (> 0).
	Latency time.Duration
	// Knee is how many requests are served at once at Latency (≥ 1).
	Knee int
	// Ceiling (≥ 0) is the most requests in progress: one arriving when
	// Ceiling are in progress is shed. 0 means none.
	Ceiling int
	// StateCeiling makes every response state Ceiling as an IETF
	// concurrency policy: RateLimit-Policy: "concurrency";q=Ceiling;
	// qu="concurrent-requests". It needs a Ceiling.
	StateCeiling bool
	// Jitter (≥ 0) spreads each service time: it is multiplied by a
	// log-normal factor of mean 1 whose log has standard deviation Jitter
	// (0.1: most within ±20%; 0.5: an LLM's spread of output lengths).
	Jitter float64
	// Seed seeds Jitter's random factors.
	Seed uint64
	// Shed is the status of a shed request: 0 means 503 Service
	// Unavailable; Anthropic answers 529.
	Shed int
	// ShedLatency (≥ 0) is how long a shed request takes to be answered.
	ShedLatency time.Duration
}

// ConcurrencyServer is a simulated API of ConcurrencyConfig's shape, served
// in memory (Transport) in front of an optional rate-limited Server. It is
// safe for concurrent use; its mutex is never held while a request sleeps.
type ConcurrencyServer struct {
	cfg   ConcurrencyConfig
	quota http.RoundTripper // nil: no rate limit

	mu       sync.Mutex
	rng      *rand.Rand
	inFlight int
	stats    ConcurrencyStats
}

// ConcurrencyStats are a ConcurrencyServer's totals since NewConcurrency.
type ConcurrencyStats struct {
	Requests int // every request that reached the server
	Served   int // requests served (whatever the quota server answered)
	Shed     int // requests shed over the ceiling
	// MaxInFlight is the most requests in progress at once.
	MaxInFlight int
}

// NewConcurrency returns a ConcurrencyServer for cfg. When quota is not
// nil, a request that is not shed is first answered by quota (its status
// and headers; its own Latency should be 0), then held for the service
// time. It panics if cfg is invalid, naming the field.
func NewConcurrency(cfg ConcurrencyConfig, quota *Server) *ConcurrencyServer {
	bad := func(field string, v any, want string) {
		panic(fmt.Sprintf("apisim: invalid ConcurrencyConfig.%s %v: %s", field, v, want))
	}
	switch {
	case cfg.Latency <= 0:
		bad("Latency", cfg.Latency, "must be > 0")
	case cfg.Knee < 1:
		bad("Knee", cfg.Knee, "must be ≥ 1")
	case cfg.Ceiling < 0:
		bad("Ceiling", cfg.Ceiling, "must be ≥ 0")
	case cfg.StateCeiling && cfg.Ceiling == 0:
		bad("StateCeiling", true, "needs a Ceiling")
	case !(cfg.Jitter >= 0 && cfg.Jitter <= 2):
		bad("Jitter", cfg.Jitter, "must be in [0, 2]")
	case cfg.ShedLatency < 0:
		bad("ShedLatency", cfg.ShedLatency, "must be ≥ 0")
	}
	if cfg.Shed == 0 {
		cfg.Shed = http.StatusServiceUnavailable
	}
	s := &ConcurrencyServer{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	if quota != nil {
		s.quota = quota.Transport()
	}
	return s
}

// Stats returns the server's totals.
func (s *ConcurrencyServer) Stats() ConcurrencyStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// InFlight is how many requests are in progress now.
func (s *ConcurrencyServer) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// admit counts a request in and returns its service time, or shed.
func (s *ConcurrencyServer) admit() (service time.Duration, shed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	if s.cfg.Ceiling > 0 && s.inFlight >= s.cfg.Ceiling {
		s.stats.Shed++
		return s.cfg.ShedLatency, true
	}
	s.inFlight++
	s.stats.Served++
	s.stats.MaxInFlight = max(s.stats.MaxInFlight, s.inFlight)
	f := max(1, float64(s.inFlight)/float64(s.cfg.Knee))
	if s.cfg.Jitter > 0 {
		j := s.cfg.Jitter
		f *= math.Exp(j*s.rng.NormFloat64() - j*j/2)
	}
	return time.Duration(f * float64(s.cfg.Latency)), false
}

func (s *ConcurrencyServer) leave() {
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
}

// Transport returns an in-memory http.RoundTripper served by s. Like
// net/http's transport it reports to the request's httptrace.ClientTrace
// when the request was written (WroteRequest, once admitted) and when
// the response began (GotFirstResponseByte), so a client can tell the
// server's time from time spent before the request was sent. It returns
// the context's error if the request's context ends first.
func (s *ConcurrencyServer) Transport() http.RoundTripper { return concurrencyTransport{s} }

type concurrencyTransport struct{ s *ConcurrencyServer }

func (t concurrencyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.s
	if err := consume(req); err != nil {
		return nil, err
	}
	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	service, shed := s.admit()
	if shed {
		if err := sleep(ctx, service); err != nil {
			return nil, err
		}
		return s.respond(req, trace, s.cfg.Shed, http.Header{}), nil
	}
	defer s.leave()
	status, header := http.StatusOK, http.Header{}
	if s.quota != nil {
		resp, err := s.quota.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		status, header = resp.StatusCode, resp.Header
	}
	if err := sleep(ctx, service); err != nil {
		return nil, err
	}
	return s.respond(req, trace, status, header), nil
}

// respond builds the response, stating the ceiling when configured.
func (s *ConcurrencyServer) respond(req *http.Request, trace *httptrace.ClientTrace, status int, h http.Header) *http.Response {
	if s.cfg.StateCeiling {
		h.Add("RateLimit-Policy", `"concurrency";q=`+strconv.Itoa(s.cfg.Ceiling)+`;qu="concurrent-requests"`)
	}
	if trace != nil && trace.GotFirstResponseByte != nil {
		trace.GotFirstResponseByte()
	}
	body := []byte(`{"ok":true}`)
	if status != http.StatusOK {
		body = []byte(`{"error":"` + http.StatusText(status) + `"}`)
	}
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
