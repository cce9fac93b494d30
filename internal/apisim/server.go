package apisim

import (
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TokensHeader is the request header carrying a request's actual token usage
// (a non-negative integer; anything else counts as 0), charged against
// Config.TokenLimit and added to Stats.TokensUsed when the request succeeds.
const TokensHeader = "X-Apisim-Tokens"

// InputTokensHeader and OutputTokensHeader carry a request's input and
// output token usage, counted against Config.InputTokenLimit and
// Config.OutputTokenLimit (Anthropic's separate input and output token
// limits). Without TokensHeader, their sum is the request's token usage.
const (
	InputTokensHeader  = "X-Apisim-Input-Tokens"
	OutputTokensHeader = "X-Apisim-Output-Tokens"
)

// tokenKind names a token quota: the total, input or output tokens.
type tokenKind int

const (
	totalTokens tokenKind = iota
	inputTokens
	outputTokens
	tokenKinds
)

// usage is a request's token usage of each kind.
type usage [tokenKinds]int

// usageOf reads a request's token usage from its headers (see TokensHeader).
func usageOf(h http.Header) usage {
	var u usage
	u[inputTokens] = parseTokens(h.Get(InputTokensHeader))
	u[outputTokens] = parseTokens(h.Get(OutputTokensHeader))
	if v := h.Get(TokensHeader); v != "" {
		u[totalTokens] = parseTokens(v)
	} else {
		u[totalTokens] = u[inputTokens] + u[outputTokens]
	}
	return u
}

// tokQuota is one token quota of a bucket, with its limit history.
type tokQuota struct {
	q      quota
	limits limitHistory
}

// tokFigures is what the headers report of one token quota.
type tokFigures struct {
	has           bool
	limit, remain float64
	reset         time.Duration
}

// Server is a simulated rate-limited HTTP API. Serve it over a socket with
// httptest.NewServer(s) or in memory with s.Transport(). All methods are safe
// for concurrent use; one mutex guards the state and is never held while
// sleeping Latency.
type Server struct {
	mu     sync.Mutex
	cfg    Config
	start  time.Time     // clock reading at New/Reset; offsets are measured from it
	last   time.Duration // latest offset seen, so a clock going backwards cannot rewind quotas
	shared *bucket
	routes []*bucket // longest prefix first
	app    quota     // Config.AppLimit's, counted by every request; nil without one
	stats  Stats
	events []Event
	// shedAcc accumulates ShedShare per request: a request sheds when it
	// reaches 1 (evenly, deterministically).
	shedAcc float64
	// recent holds the offsets of the requests in the trailing
	// SecondaryWindow, oldest first (only with Config.SecondaryLimit).
	recent []time.Duration
}

// Stats are totals since New or Reset, for the visible client only (requests
// that reached ServeHTTP or Transport).
type Stats struct {
	Requests  int // OK + Throttled + Shed + Secondary + Gone
	OK        int // 200 responses
	Throttled int // 429 responses of the stated quota
	Shed      int // 503 responses of Config.ShedShare
	Secondary int // 403 responses of Config.SecondaryLimit
	Gone      int // 429 insufficient_quota responses of Config.QuotaGone
	// TokensUsed sums the X-Apisim-Tokens of OK requests (see
	// TokensHeader); InputTokensUsed and OutputTokensUsed their input and
	// output tokens.
	TokensUsed, InputTokensUsed, OutputTokensUsed int
	// FirstRequest and LastRequest are the admission times (Config.Now) of the
	// first and latest request; zero when there were none.
	FirstRequest, LastRequest time.Time
	// UnseenOK and UnseenThrottled count the simulated unseen client's requests.
	UnseenOK, UnseenThrottled int
}

// Event records one visible request, in admission order.
type Event struct {
	At     time.Time // admission time (Config.Now)
	Status int       // 200, 429 (quota or Config.QuotaGone), 403 (Config.SecondaryLimit) or 503 (Config.ShedShare)
	Key    string    // bucket: "default" for the shared quota, else the route's name
	Path   string    // request URL path
	Tokens int       // token usage the request declared in X-Apisim-Tokens
}

// bucket is one quota (the shared one or a route's): requests and, optionally,
// tokens, plus the unseen client's schedule and the limit history for Capacity.
type bucket struct {
	name      string
	prefix    string // "" for the shared bucket
	id        string // opaque Discord-style bucket id
	req       quota
	toks      [tokenKinds]*tokQuota // nil for a kind without a quota
	reqLimits limitHistory
	used      bool // saw a visible request since New/Reset

	unseenNext time.Duration // offset of the unseen client's next request
}

// New returns a Server for cfg. It panics if cfg is invalid, naming the field.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg.withDefaults()}
	s.resetLocked()
	return s
}

// Reset returns the server to the state New left it in, at the current time:
// counters, events, quotas (full), windows (starting now), limits (as
// configured, undoing SetLimit) and the unseen client all start afresh.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

func (s *Server) resetLocked() {
	s.start = s.cfg.Now()
	s.last = 0
	s.stats = Stats{}
	s.events = nil
	s.recent = nil
	s.shedAcc = 0
	s.shared = s.newBucket(sharedName, "", s.cfg.Limit)
	s.app = nil
	if s.cfg.AppLimit > 0 {
		s.app = newQuota(FixedWindow, s.cfg.Window, float64(s.cfg.AppLimit), float64(s.cfg.AppLimit))
	}
	s.routes = s.routes[:0]
	for _, prefix := range sortedRoutes(s.cfg.Routes) {
		s.routes = append(s.routes, s.newBucket(routeName(prefix), prefix, s.cfg.Routes[prefix]))
	}
}

func (s *Server) newBucket(name, prefix string, limit int) *bucket {
	h := fnv.New32a()
	h.Write([]byte(name))
	// Every token bucket (a route's, the token quota) keeps the shared
	// bucket's Burst/Limit ratio; 0 means capacity = limit.
	ratio := float64(s.cfg.Burst) / float64(s.cfg.Limit)
	b := &bucket{
		name:      name,
		prefix:    prefix,
		id:        fmt.Sprintf("%08x", h.Sum32()),
		req:       newQuota(s.cfg.Algorithm, s.cfg.Window, float64(limit), ratio*float64(limit)),
		reqLimits: limitHistory{{0, float64(limit)}},
	}
	for k, n := range s.cfg.tokenLimits() {
		if n > 0 {
			b.toks[k] = &tokQuota{
				q:      newQuota(s.cfg.Algorithm, s.cfg.Window, float64(n), ratio*float64(n)),
				limits: limitHistory{{0, float64(n)}},
			}
		}
	}
	if s.cfg.UnseenShare > 0 {
		b.unseenNext = s.unseenInterval(float64(limit)) / 2 // evenly: mid-slot
	}
	return b
}

// now returns the current offset from start, never going backwards.
func (s *Server) now() (time.Duration, time.Time) {
	wall := s.cfg.Now()
	if off := wall.Sub(s.start); off > s.last {
		s.last = off
	}
	return s.last, wall
}

func (s *Server) bucketFor(path string) *bucket {
	for _, b := range s.routes {
		if strings.HasPrefix(path, b.prefix) {
			return b
		}
	}
	return s.shared
}

func (s *Server) bucketNamed(key string) *bucket {
	if key == sharedName {
		return s.shared
	}
	for _, b := range s.routes {
		if b.name == key {
			return b
		}
	}
	return nil
}

// unseenInterval is the gap between the unseen client's requests at limit.
func (s *Server) unseenInterval(limit float64) time.Duration {
	return max(1, durationOf(float64(s.cfg.Window)/(s.cfg.UnseenShare*limit)))
}

// runUnseen replays the unseen client's requests due up to t, each at its own
// instant, so they land in the windows they belong to.
func (s *Server) runUnseen(b *bucket, t time.Duration) {
	if s.cfg.UnseenShare == 0 {
		return
	}
	// After a long idle stretch only the last few windows can still matter
	// (longer for a bucket refilling from empty); skip the older requests.
	ratio := math.Max(1, float64(s.cfg.Burst)/float64(s.cfg.Limit))
	horizon := durationOf(float64(s.cfg.Window) * (2 + ratio/(1-s.cfg.UnseenShare)))
	if t-b.unseenNext > horizon {
		step := s.unseenInterval(b.req.limit(b.unseenNext))
		b.unseenNext += (t - horizon - b.unseenNext) / step * step
	}
	for b.unseenNext <= t {
		at := b.unseenNext
		limit := b.req.limit(at)
		// Its share of every token quota, evenly per request.
		var n [tokenKinds]float64
		for k, tq := range b.toks {
			if tq != nil {
				n[k] = tq.q.limit(at) / limit
			}
		}
		if b.req.fits(at, 1) && b.tokensFit(at, n) {
			b.req.take(at, 1)
			b.takeTokens(at, n)
			s.stats.UnseenOK++
		} else {
			s.stats.UnseenThrottled++
		}
		b.unseenNext += s.unseenInterval(limit)
	}
}

// decision is what admission decided, with the figures the headers report.
type decision struct {
	ok         bool
	shed       bool // overload: 503, not counted
	secondary  bool // over Config.SecondaryLimit: 403, not counted
	gone       bool // Config.QuotaGone: 429 insufficient_quota, not counted
	bucket     *bucket
	now        time.Duration
	wall       time.Time
	limit      float64
	remaining  float64
	reset      time.Duration
	toks       [tokenKinds]tokFigures
	app        tokFigures    // Config.AppLimit's quota, when there is one
	retryAfter time.Duration // 429 only: until this request would fit
}

// tokensFit reports whether every token quota of b fits n at t.
func (b *bucket) tokensFit(t time.Duration, n [tokenKinds]float64) bool {
	for k, tq := range b.toks {
		if tq != nil && !tq.q.fits(t, n[k]) {
			return false
		}
	}
	return true
}

func (b *bucket) takeTokens(t time.Duration, n [tokenKinds]float64) {
	for k, tq := range b.toks {
		if tq != nil {
			tq.q.take(t, n[k])
		}
	}
}

// report fills in what d's headers say of b's quotas at t.
func (b *bucket) report(d *decision, t time.Duration) {
	d.limit, d.remaining, d.reset = b.req.limit(t), b.req.remaining(t), b.req.resetAt(t)
	for k, tq := range b.toks {
		if tq != nil {
			d.toks[k] = tokFigures{has: true, limit: tq.q.limit(t), remain: tq.q.remaining(t), reset: tq.q.resetAt(t)}
		}
	}
}

// admit counts one visible request to path using tokens and decides its fate.
func (s *Server) admit(path string, use usage) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, wall := s.now()
	b := s.bucketFor(path)
	s.runUnseen(b, t)
	b.used = true

	var n [tokenKinds]float64
	for k, v := range use {
		n[k] = float64(v)
	}
	tokens := use[totalTokens]
	// Refusals that are not the stated quota's: told the quota as it
	// stands, counted against nothing.
	refuse := func(d decision, status int, count *int) decision {
		d.bucket, d.now, d.wall = b, t, wall
		b.report(&d, t)
		*count++
		s.record(wall, Event{At: wall, Status: status, Key: b.name, Path: path, Tokens: tokens})
		return d
	}
	if s.cfg.QuotaGone {
		return refuse(decision{gone: true}, http.StatusTooManyRequests, &s.stats.Gone)
	}
	if s.cfg.SecondaryLimit > 0 && s.overSecondary(t) {
		return refuse(decision{secondary: true}, http.StatusForbidden, &s.stats.Secondary)
	}
	if s.cfg.ShedShare > 0 {
		if s.shedAcc += s.cfg.ShedShare; s.shedAcc >= 1 {
			s.shedAcc--
			return refuse(decision{shed: true}, http.StatusServiceUnavailable, &s.stats.Shed)
		}
	}
	ok := b.req.fits(t, 1) && b.tokensFit(t, n) && (s.app == nil || s.app.fits(t, 1))
	d := decision{ok: ok, bucket: b, now: t, wall: wall}
	if ok {
		b.req.take(t, 1)
		b.takeTokens(t, n)
		if s.app != nil {
			s.app.take(t, 1)
		}
	} else {
		d.retryAfter = s.retryAt(b, t, n) - t
	}
	b.report(&d, t)
	if s.app != nil {
		d.app = tokFigures{has: true, limit: s.app.limit(t), remain: s.app.remaining(t), reset: s.app.resetAt(t)}
	}

	status := 200
	if ok {
		s.stats.OK++
		s.stats.TokensUsed += tokens
		s.stats.InputTokensUsed += use[inputTokens]
		s.stats.OutputTokensUsed += use[outputTokens]
	} else {
		status = 429
		s.stats.Throttled++
	}
	s.record(wall, Event{At: wall, Status: status, Key: b.name, Path: path, Tokens: tokens})
	return d
}

// retryAt is when a refused request of n tokens fits bucket b, asked at
// t: once every quota allows it; one that can never fit is told the full
// reset, as a server would answer a too-large request. s.mu held.
func (s *Server) retryAt(b *bucket, t time.Duration, n [tokenKinds]float64) time.Duration {
	at, fits := b.req.availableAt(t, 1)
	for k, tq := range b.toks {
		if tq != nil {
			tat, tfits := tq.q.availableAt(t, n[k])
			fits = fits && tfits
			at = max(at, tat)
		}
	}
	if s.app != nil {
		aat, afits := s.app.availableAt(t, 1)
		fits = fits && afits
		at = max(at, aat)
	}
	if !fits {
		at = b.req.resetAt(t)
		for _, tq := range b.toks {
			if tq != nil {
				at = max(at, tq.q.resetAt(t))
			}
		}
	}
	return at
}

// record counts one visible request in Stats.Requests and Events.
func (s *Server) record(wall time.Time, e Event) {
	s.stats.Requests++
	if s.stats.FirstRequest.IsZero() {
		s.stats.FirstRequest = wall
	}
	s.stats.LastRequest = wall
	s.events = append(s.events, e)
}

// overSecondary records a request arriving at offset t and reports whether
// it is over Config.SecondaryLimit: SecondaryLimit or more requests already
// arrived in the trailing SecondaryWindow.
func (s *Server) overSecondary(t time.Duration) bool {
	i := 0
	for i < len(s.recent) && t-s.recent[i] >= s.cfg.SecondaryWindow {
		i++
	}
	s.recent = append(s.recent[i:], t)
	return len(s.recent) > s.cfg.SecondaryLimit
}

// parseTokens reads X-Apisim-Tokens; malformed or negative values count as 0.
func parseTokens(v string) int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Stats returns the totals since New or Reset.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Events returns a copy of every visible request since New or Reset, in
// admission order.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// buckets returns the shared bucket and the route buckets.
func (s *Server) buckets() []*bucket { return append([]*bucket{s.shared}, s.routes...) }
