package pacer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/observe"
)

// The zero Transport works as NewTransport(nil) does, like the zero
// http.Client: it sends through http.DefaultTransport, learns limits from
// headers, retries a 429 (retry.DefaultMax) and is safe to start using from
// many goroutines at once.
func TestZeroTransportIsUsable(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4000")
		w.Header().Set("X-RateLimit-Reset", "3600")
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests) // no Retry-After: a backoff of 100-200 ms
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	var tr Transport
	assert.Empty(t, tr.Stats(), "a zero Transport reports no endpoints before use")
	defer tr.CloseIdleConnections() // forwarded to http.DefaultTransport: no goroutine outlives the test

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
			if !assert.NoError(t, err) {
				return
			}
			resp, err := tr.RoundTrip(req)
			if !assert.NoError(t, err) {
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, "the 429 was retried")
			assert.Equal(t, "ok", string(body))
		})
	}
	wg.Wait()
	assert.EqualValues(t, 5, n.Load(), "four requests and one retry")
	st := tr.Stats()
	require.Len(t, st, 1)
	assert.Equal(t, "http://"+srv.Listener.Addr().String(), st[0].Key)
	assert.EqualValues(t, 1, st[0].Retries)
	assert.Equal(t, observe.ModeHeaders, st[0].Mode, "the limit was learnt from the headers")
	assert.EqualValues(t, 5, st[0].Requests)
	assert.Equal(t, 30*time.Second, tr.Backoff(time.Second, 0, 10, nil), "Backoff's cap")
}
