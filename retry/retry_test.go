package retry

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// respond returns a response of code, its status text for a body, with the
// header fields kv (name, value, ...).
func respond(code int, kv ...string) func() *http.Response {
	return respondBody(code, http.StatusText(code), kv...)
}

// respondBody is respond with a body.
func respondBody(code int, body string, kv ...string) func() *http.Response {
	return func() *http.Response {
		resp := &http.Response{StatusCode: code, Status: http.StatusText(code), Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
		for i := 0; i+1 < len(kv); i += 2 {
			resp.Header.Add(kv[i], kv[i+1])
		}
		return resp
	}
}

// DefaultCheck called outside a Transport reads the response itself, and
// gives the body back byte for byte.
func TestDefaultCheck(t *testing.T) {
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
			got, err := DefaultCheck(context.Background(), resp, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, want, body, "the body is given back byte for byte")
		})
	}
	got, err := DefaultCheck(context.Background(), nil, errors.New("connection reset"))
	assert.False(t, got)
	assert.NoError(t, err)
}
