// Package awsadaptive is the client-side rate limiter of the AWS SDK for Go
// v2's "adaptive" retry mode (aws/retry: adaptive_ratelimit.go,
// adaptive_token_bucket.go, adaptive.go), rewritten from its published
// algorithm so the adaptation benchmark can compare pacer with it on plain
// HTTP. It is benchmark support, not a library.
//
// The algorithm: a token bucket that starts disabled and switches on at the
// first throttle. The send rate is measured per 0.5 s time bucket and
// smoothed with an EWMA (weight 0.8 on the newest bucket). On a throttle, the
// rate becomes β·min(measured, current) (β = 0.7) and that minimum is
// remembered as lastMax; on success it follows the CUBIC curve
// C·(t − W)³ + lastMax (C = 0.4, W = ∛(lastMax·(1−β)/C), t the time since the
// last throttle). Every new rate is capped at twice the measured rate; the
// fill rate has a floor of 0.5 per second. Only throttles count: response
// headers are ignored.
//
// The bucket's capacity follows the rate, with a minimum of 1 token so that
// a request can always be admitted eventually.
package awsadaptive

import (
	"math"
	"sync"
	"time"
)

// The SDK's constants.
const (
	smooth        = 0.8 // EWMA weight of the newest measurement
	beta          = 0.7 // multiplicative decrease on throttle
	scaleConstant = 0.4 // CUBIC C
	minFillRate   = 0.5 // tokens per second
	minCapacity   = 1.0
)

// RateLimit is the adaptive rate limiter: AcquireToken before each attempt,
// Update after it. Safe for concurrent use.
type RateLimit struct {
	now func() time.Time

	mu                 sync.Mutex
	tokenBucketEnabled bool
	fillRate           float64
	calculatedRate     float64
	lastRefilled       time.Time
	measuredTxRate     float64
	lastTxRateBucket   float64
	requestCount       int64
	lastMaxRate        float64
	lastThrottleTime   time.Time
	timeWindow         float64
	tokens, capacity   float64
}

// NewRateLimit returns a limiter reading time from now (nil: time.Now).
func NewRateLimit(now func() time.Time) *RateLimit {
	if now == nil {
		now = time.Now
	}
	t := now()
	return &RateLimit{
		now:              now,
		lastTxRateBucket: math.Floor(seconds(t)),
		lastThrottleTime: t,
	}
}

// AcquireToken takes amount tokens if the bucket is enabled and holds them.
// Otherwise it reports how long to wait before trying again (the SDK's
// caller sleeps that long and retries).
func (a *RateLimit) AcquireToken(amount float64) (ok bool, retryIn time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.tokenBucketEnabled {
		return true, 0
	}
	a.refill()
	if a.tokens >= amount {
		a.tokens -= amount
		return true, 0
	}
	// Rounded up: a deficit smaller than a nanosecond's refill would
	// otherwise say "wait 0", and a caller in virtual time (testing/synctest,
	// where the clock moves only when every goroutine waits) would spin.
	return false, time.Duration(math.Ceil((amount - a.tokens) / a.fillRate * float64(time.Second)))
}

// Update records the outcome of one attempt: throttled or not.
func (a *RateLimit) Update(throttled bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.updateMeasuredRate()
	if throttled {
		rateToUse := a.measuredTxRate
		if a.tokenBucketEnabled {
			rateToUse = math.Min(a.measuredTxRate, a.fillRate)
		}
		a.lastMaxRate = rateToUse
		a.calculateTimeWindow()
		a.lastThrottleTime = a.now()
		a.calculatedRate = rateToUse * beta
		a.tokenBucketEnabled = true
	} else {
		a.calculateTimeWindow()
		dt := a.now().Sub(a.lastThrottleTime).Seconds()
		a.calculatedRate = scaleConstant*math.Pow(dt-a.timeWindow, 3) + a.lastMaxRate
	}
	newRate := math.Min(a.calculatedRate, 2*a.measuredTxRate)
	a.updateRate(newRate)
}

// State is a snapshot for tests and reports.
type State struct {
	Enabled  bool
	FillRate float64 // tokens per second
	Measured float64 // smoothed send rate, per second
	LastMax  float64
}

// State returns the limiter's current figures.
func (a *RateLimit) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return State{Enabled: a.tokenBucketEnabled, FillRate: a.fillRate, Measured: a.measuredTxRate, LastMax: a.lastMaxRate}
}

func (a *RateLimit) calculateTimeWindow() {
	a.timeWindow = math.Cbrt(a.lastMaxRate * (1 - beta) / scaleConstant)
}

func (a *RateLimit) updateRate(newRPS float64) {
	a.refill()
	a.fillRate = math.Max(newRPS, minFillRate)
	a.capacity = math.Max(newRPS, minCapacity)
	a.tokens = math.Min(a.tokens, a.capacity)
}

// updateMeasuredRate counts attempts per half-second time bucket and folds
// each completed bucket's rate into the EWMA.
func (a *RateLimit) updateMeasuredRate() {
	timeBucket := math.Floor(seconds(a.now())*2) / 2
	a.requestCount++
	if timeBucket > a.lastTxRateBucket {
		currentRate := float64(a.requestCount) / (timeBucket - a.lastTxRateBucket)
		a.measuredTxRate = currentRate*smooth + a.measuredTxRate*(1-smooth)
		a.requestCount = 0
		a.lastTxRateBucket = timeBucket
	}
}

func (a *RateLimit) refill() {
	now := a.now()
	if a.lastRefilled.IsZero() {
		a.lastRefilled = now
		return
	}
	a.tokens = math.Min(a.capacity, a.tokens+now.Sub(a.lastRefilled).Seconds()*a.fillRate)
	a.lastRefilled = now
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / float64(time.Second) }
