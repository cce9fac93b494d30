package retry_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/pacer-go/pacer"
	"github.com/pacer-go/pacer/retry"
)

// A Check changes what is retried without forking pacer. This API's 503
// means "down for maintenance" (a retry only adds load) and its gateway's
// 502s are transient; every other decision is left to DefaultCheck.
func ExamplePolicy() {
	var flaky, down atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/flaky", func(w http.ResponseWriter, r *http.Request) {
		if flaky.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		down.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	policy := func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if resp != nil {
			switch resp.StatusCode {
			case http.StatusServiceUnavailable:
				return false, nil
			case http.StatusBadGateway:
				return true, nil
			}
		}
		return retry.DefaultCheck(ctx, resp, err)
	}
	client := &http.Client{Transport: pacer.NewTransport(nil, pacer.WithRetry(retry.Policy{Check: policy}))}
	for _, path := range []string{"/flaky", "/down"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(path, resp.Status)
	}
	fmt.Println("requests:", flaky.Load(), down.Load())
	// Output:
	// /flaky 200 OK
	// /down 503 Service Unavailable
	// requests: 2 1
}

// A signed request must be signed again when it is retried: here an HMAC
// signature over a nonce the server accepts once (AWS SigV4 signs a
// timestamp, with the same effect). Without Prepare the retry would
// repeat the first signature and be rejected as a replay.
func ExamplePolicy_prepare() {
	key := []byte("shared-secret")
	var nonce atomic.Int64
	sign := func(r *http.Request) error {
		n := strconv.FormatInt(nonce.Add(1), 10)
		mac := hmac.New(sha256.New, key)
		io.WriteString(mac, r.Method+" "+r.URL.Path+" "+n)
		r.Header.Set("X-Nonce", n)
		r.Header.Set("X-Signature", hex.EncodeToString(mac.Sum(nil)))
		return nil
	}

	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.Header.Get("X-Nonce")
		mac := hmac.New(sha256.New, key)
		io.WriteString(mac, r.Method+" "+r.URL.Path+" "+n)
		want := hex.EncodeToString(mac.Sum(nil))
		mu.Lock()
		replayed, first := seen[n], len(seen) == 0
		seen[n] = true
		mu.Unlock()
		switch {
		case replayed || !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Signature"))):
			w.WriteHeader(http.StatusUnauthorized)
		case first:
			w.WriteHeader(http.StatusTooManyRequests) // the client retries after a short backoff
		default:
			io.WriteString(w, "order placed")
		}
	}))
	defer srv.Close()

	client := &http.Client{Transport: pacer.NewTransport(nil, pacer.WithRetry(retry.Policy{Prepare: sign}))}
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/orders/42", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	sign(req) // the first attempt is signed by the caller
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body))
	// Output: 200 OK order placed
}
