package pacer

import (
	"cmp"
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
)

// refuse503 is a policy that never retries a 503 and leaves the rest to
// DefaultRetryPolicy.
func refuse503(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
		return false, nil
	}
	return DefaultRetryPolicy(ctx, resp, err)
}

func TestUserPolicyThatRefusesToRetry503IsObeyed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMock(respondInTurn(respond(503), respond(200)))
		resp := mustGet(t, NewTransport(m, WithRetryPolicy(refuse503)), mockURL)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, 1, m.GetTotalCallCount(), "the 503 was not retried")

		// The same policy still defers to the default for a 429, and the
		// default alone retries the 503.
		m = newMock(respondInTurn(respond(429), respond(200)))
		assert.Equal(t, http.StatusOK, mustGet(t, NewTransport(m, WithRetryPolicy(refuse503)), mockURL).StatusCode)
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
		{"policy says retry with an error until retries run out", true, 429, 1 + DefaultRetries},
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
				tr := NewTransport(m, WithRetryPolicy(func(_ context.Context, resp *http.Response, err error) (bool, error) {
					require.NoError(t, err)
					seen = append(seen, resp.StatusCode)
					return tc.retry, errTeapot
				}))
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
			return DefaultRetryPolicy(ctx, resp, err)
		}
		tr := NewTransport(m, WithRetryPolicy(retryResets))
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
		tr := NewTransport(m, WithRetryPolicy(always), WithMaxWait(time.Second))
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

func TestDefaultRetryPolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resp   func() *http.Response
		want   bool
		method string // the request's; "" means GET
	}{
		{"429", respond(429), true, ""},
		{"POST 429", respond(429), true, http.MethodPost},
		{"POST 529", respond(529), true, http.MethodPost},
		{"POST 503", respond(503), false, http.MethodPost},
		{"POST 503 the server says to retry", respond(503, "X-Should-Retry", "true"), true, http.MethodPost},
		{"503 to a request the response does not name", respond(503), false, "none"},
		{"503", respond(503), true, ""},
		{"529", respond(529), true, ""},
		{"200", respond(200), false, ""},
		{"500", respond(500), false, ""},
		{"403 without rate-limit signs", respond(403), false, ""},
		{"403 with a spent quota", respond(403, "X-RateLimit-Remaining", "0"), true, ""},
		{"403 with Retry-After", respond(403, "Retry-After", "30"), true, ""},
		{"403 stating a secondary limit in its body", respondBody(403, `{"message":"You have exceeded a secondary rate limit"}`), true, ""},
		{"429 with the quota gone for good", respondBody(429, `{"error":{"code":"insufficient_quota"}}`), false, ""},
		{"429 the server says not to retry", respond(429, "X-Should-Retry", "false"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.resp()
			if tc.method != "none" {
				resp.Request, _ = http.NewRequest(cmp.Or(tc.method, http.MethodGet), "https://api.example.com/", nil)
			}
			want, _ := io.ReadAll(tc.resp().Body)
			got, err := DefaultRetryPolicy(context.Background(), resp, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, want, body, "the body is given back byte for byte")
		})
	}
	got, err := DefaultRetryPolicy(context.Background(), nil, errors.New("connection reset"))
	assert.False(t, got)
	assert.NoError(t, err)
}

// Called from a user's policy, DefaultRetryPolicy decides as the transport
// without one does: here a secondary limit stated only in a 403's body.
func TestDefaultRetryPolicyWithinAUserPolicyDecidesAsTheTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, opts := range [][]Option{nil, {WithRetryPolicy(DefaultRetryPolicy)}} {
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
		{"with the hook the replay is signed again", []Option{WithPrepareRetry(func(r *http.Request) error { sign(r, key); return nil })}, true, 2},
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
		tr := NewTransport(m, WithPrepareRetry(func(*http.Request) error { prepared.Add(1); return errNoKey }))
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

func TestNilRetryHooksPanicNamingTheOption(t *testing.T) {
	assert.PanicsWithValue(t, "pacer: WithRetryPolicy(nil)", func() { WithRetryPolicy(nil) })
	assert.PanicsWithValue(t, "pacer: WithPrepareRetry(nil)", func() { WithPrepareRetry(nil) })
}

// TestDefaultRetryPolicyInAPolicyJudgesTheCallersRequest: a policy that
// wraps DefaultRetryPolicy gets the Transport's judgement of the caller's
// request even when the base transport does not set resp.Request: a GET
// that met a 503 is retried, a POST is not.
func TestDefaultRetryPolicyInAPolicyJudgesTheCallersRequest(t *testing.T) {
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
				tr := NewTransport(base, WithRetryPolicy(func(ctx context.Context, resp *http.Response, err error) (bool, error) {
					return DefaultRetryPolicy(ctx, resp, err)
				}))
				r, _ := http.NewRequest(tc.method, mockURL, strings.NewReader("x"))
				resp, err := tr.RoundTrip(r)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.calls, calls)
			})
		})
	}
}
