package pacer

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/retry"
)

// refuse503 is a policy that never retries a 503 and leaves the rest to
// retry.DefaultCheck.
func refuse503(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
		return false, nil
	}
	return retry.DefaultCheck(ctx, resp, err)
}

func TestUserPolicyThatRefusesToRetry503IsObeyed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(503), respond(200)))
		resp := mustGet(t, NewTransport(m, WithRetry(retry.Policy{Check: refuse503})), mockURL)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, 1, m.GetTotalCallCount(), "the 503 was not retried")

		// The same policy still defers to the default for a 429, and the
		// default alone retries the 503.
		m = newMock(respondInTurn(respond(429), respond(200)))
		assert.Equal(t, http.StatusOK, mustGet(t, NewTransport(m, WithRetry(retry.Policy{Check: refuse503})), mockURL).StatusCode)
		assert.Equal(t, 2, m.GetTotalCallCount())
		m = newMock(respondInTurn(respond(503), respond(200)))
		assert.Equal(t, http.StatusOK, mustGet(t, NewTransport(m), mockURL).StatusCode)
		assert.Equal(t, 2, m.GetTotalCallCount())
	})
}

func TestRetryPolicyErrorIsReturnedAndTheResponseClosed(t *testing.T) {
	errTeapot := errors.New("teapot")
	for _, tc := range []struct {
		name   string
		retry  bool
		status int
		calls  int
	}{
		{"policy says stop with an error", false, 418, 1},
		// As in go-retryablehttp: the error is returned once no retry
		// is made, here because retries run out.
		{"policy says retry with an error until retries run out", true, 429, 1 + retry.DefaultMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var bodies []*spyRespBody
				m := newMock(func(r *http.Request) (*http.Response, error) {
					b := &spyRespBody{r: strings.NewReader("short and stout")}
					bodies = append(bodies, b)
					return &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: b, Request: r}, nil
				})
				var seen []int
				tr := NewTransport(m, WithRetry(retry.Policy{Check: func(_ context.Context, resp *http.Response, err error) (bool, error) {
					require.NoError(t, err)
					seen = append(seen, resp.StatusCode)
					return tc.retry, errTeapot
				}}))
				req, err := http.NewRequest(http.MethodGet, mockURL, nil)
				require.NoError(t, err)
				resp, err := tr.RoundTrip(req)
				assert.ErrorIs(t, err, errTeapot)
				assert.Nil(t, resp, "a response is never returned with an error")
				assert.Equal(t, tc.calls, m.GetTotalCallCount())
				assert.Len(t, seen, tc.calls, "the policy judges every attempt")
				for i, b := range bodies {
					assert.True(t, b.closed.Load(), "response %d closed", i+1)
				}
			})
		})
	}
}

func TestRetryPolicyMayRetryTransportErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		m := newMock(func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 1 {
				return nil, errors.New("connection reset")
			}
			return respond(200)(), nil
		})
		var got []error
		retryResets := func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			got = append(got, err)
			if err != nil {
				return true, nil
			}
			return retry.DefaultCheck(ctx, resp, err)
		}
		tr := NewTransport(m, WithRetry(retry.Policy{Check: retryResets}))
		resp := mustGet(t, tr, mockURL)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 2, m.GetTotalCallCount())
		require.Len(t, got, 2)
		assert.ErrorContains(t, got[0], "connection reset")
		assert.NoError(t, got[1])
		st := tr.Stats()
		require.Len(t, st, 1)
		assert.EqualValues(t, 1, st[0].Errors)
		assert.EqualValues(t, 1, st[0].Retries)
		assert.Zero(t, st[0].InFlight)

		// The default does not retry them: the request may have been acted on.
		n.Store(0)
		m.ZeroCallCounters()
		r, err := http.NewRequest(http.MethodGet, mockURL, nil)
		require.NoError(t, err)
		_, err = NewTransport(m).RoundTrip(r)
		assert.ErrorContains(t, err, "connection reset")
		assert.Equal(t, 1, m.GetTotalCallCount())
	})
}

// A policy is consulted only about what was sent; the transport's bounds
// hold whatever it says: a POST is not replayed, a refusal by the limiter is
// not judged.
func TestRetryPolicyWorksWithinTheTransportsBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		always := func(context.Context, *http.Response, error) (bool, error) { calls.Add(1); return true, nil }
		m := newMock(respondInTurn(respond(429, "Retry-After", "600"), respond(200)))
		tr := NewTransport(m, WithRetry(retry.Policy{Check: always}), WithMaxWait(time.Second))
		r, err := http.NewRequest(http.MethodPost, mockURL, strings.NewReader("x"))
		require.NoError(t, err)
		resp, err := tr.RoundTrip(r)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 429, resp.StatusCode, "a POST is not replayed")
		assert.Equal(t, 1, m.GetTotalCallCount())

		_, err = tr.RoundTrip(r.Clone(context.Background()))
		assert.ErrorAs(t, err, new(*RateLimitError))
		assert.EqualValues(t, 1, calls.Load(), "the limiter's refusal is not the policy's to judge")
	})
}

// Called from a user's policy, retry.DefaultCheck decides as the transport
// without one does: here a secondary limit stated only in a 403's body.
func TestDefaultCheckWithinAUserPolicyDecidesAsTheTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, opts := range [][]Option{nil, {WithRetry(retry.Policy{Check: retry.DefaultCheck})}} {
			m := newMock(respondInTurn(respondBody(403, `{"message":"You have exceeded a secondary rate limit"}`), respond(200)))
			resp := mustGet(t, NewTransport(m, opts...), mockURL)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, 2, m.GetTotalCallCount())
		}
	})
}

// sign is a stand-in for an HMAC request signature with a timestamp (AWS
// SigV4, webhook schemes): the server rejects one older than a minute.
func sign(r *http.Request, key []byte) {
	ts := time.Now().UTC().Format(time.RFC3339)
	mac := hmac.New(sha256.New, key)
	io.WriteString(mac, r.Method+" "+r.URL.Path+" "+ts)
	r.Header.Set("X-Date", ts)
	r.Header.Set("X-Signature", hex.EncodeToString(mac.Sum(nil)))
}

func TestPrepareRetrySignsEveryReplayAfresh(t *testing.T) {
	key := []byte("secret")
	for _, tc := range []struct {
		name    string
		opts    []Option
		wantOK  bool
		wantLen int
	}{
		{"without the hook the replay's signature is stale", nil, false, 2},
		{"with the hook the replay is signed again", []Option{WithRetry(retry.Policy{Prepare: func(r *http.Request) error { sign(r, key); return nil }})}, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sigs []string
				var n atomic.Int32
				m := newMock(func(r *http.Request) (*http.Response, error) {
					sigs = append(sigs, r.Header.Get("X-Signature"))
					ts, err := time.Parse(time.RFC3339, r.Header.Get("X-Date"))
					if err != nil || time.Since(ts) > time.Minute {
						return respond(http.StatusUnauthorized)(), nil
					}
					want := r.Clone(r.Context())
					sign(want, key)
					if !hmac.Equal([]byte(want.Header.Get("X-Signature")), []byte(r.Header.Get("X-Signature"))) {
						return respond(http.StatusUnauthorized)(), nil
					}
					if n.Add(1) == 1 {
						return respond(429, "Retry-After", "90")(), nil
					}
					return respond(200)(), nil
				})
				r, err := http.NewRequest(http.MethodGet, mockURL, nil)
				require.NoError(t, err)
				sign(r, key)
				first := r.Header.Clone()
				resp := mustGetReq(t, NewTransport(m, append(tc.opts, WithMaxWait(5*time.Minute))...), r)
				require.Len(t, sigs, tc.wantLen)
				assert.Equal(t, tc.wantOK, resp.StatusCode == http.StatusOK, "status %d", resp.StatusCode)
				assert.Equal(t, tc.wantOK, sigs[0] != sigs[1], "a fresh signature")
				assert.Equal(t, first, r.Header, "the caller's request is not modified")
			})
		})
	}
}

func mustGetReq(t *testing.T, rt http.RoundTripper, r *http.Request) *http.Response {
	t.Helper()
	resp, err := rt.RoundTrip(r)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func TestPrepareRetryErrorEndsTheRequestUnsentWithEveryBodyClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errNoKey := errors.New("signing key expired")
		var prepared atomic.Int32
		m := newMock(respondInTurn(respond(429), respond(200)))
		tr := NewTransport(m, WithRetry(retry.Policy{Prepare: func(*http.Request) error { prepared.Add(1); return errNoKey }}))
		var bs spyBodies
		resp, err := tr.RoundTrip(spyRequest(t, context.Background(), &bs))
		assert.ErrorIs(t, err, errNoKey)
		assert.Nil(t, resp)
		assert.EqualValues(t, 1, prepared.Load())
		assert.Equal(t, 1, m.GetTotalCallCount(), "the retry was not sent")
		bs.allClosed(t)
		assert.Len(t, bs.all, 2, "the caller's body and the replay's")
		st := tr.Stats()
		require.Len(t, st, 1)
		assert.Zero(t, st[0].InFlight, "the retry's permit was given back")
	})
}

// A Policy's zero fields are the defaults; a Max of retry.None (any
// negative Max) disables retries.
func TestRetryPolicyZeroFieldsAreTheDefaults(t *testing.T) {
	for _, tc := range []struct {
		max, want int
	}{{0, retry.DefaultMax}, {5, 5}, {retry.None, 0}, {-7, 0}} {
		c := defaultConfig()
		WithRetry(retry.Policy{Max: tc.max})(&c)
		assert.Equal(t, tc.want, c.retries, "Max %d", tc.max)
		assert.Nil(t, c.retryPolicy, "no Check: retry.DefaultCheck's fast path")
		assert.Nil(t, c.prepareRetry)
	}
	assert.Equal(t, retry.DefaultMax, defaultConfig().retries, "without WithRetry")
}

// TestDefaultCheckInAPolicyJudgesTheCallersRequest: a policy that
// wraps retry.DefaultCheck gets the Transport's judgement of the caller's
// request even when the base transport does not set resp.Request: a GET
// that met a 503 is retried, a POST is not.
func TestDefaultCheckInAPolicyJudgesTheCallersRequest(t *testing.T) {
	for _, tc := range []struct {
		method string
		calls  int
	}{{http.MethodGet, 2}, {http.MethodPost, 1}} {
		t.Run(tc.method, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls int
				base := transportFunc(func(r *http.Request) (*http.Response, error) {
					calls++
					code := http.StatusServiceUnavailable
					if calls > 1 {
						code = http.StatusOK
					}
					return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}, nil // no Request
				})
				tr := NewTransport(base, WithRetry(retry.Policy{Check: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
					return retry.DefaultCheck(ctx, resp, err)
				}}))
				r, _ := http.NewRequest(tc.method, mockURL, strings.NewReader("x"))
				resp, err := tr.RoundTrip(r)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.calls, calls)
			})
		})
	}
}
