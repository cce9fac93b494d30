package apisim

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// get sends one GET through s's in-memory Transport and returns the response
// (body closed), declaring tokens when > 0.
func get(t *testing.T, s *Server, path string, tokens int) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://api.test"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tokens > 0 {
		req.Header.Set(TokensHeader, itoa(tokens))
	}
	resp, err := s.Transport().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestFixedWindowAdmitsLimitPerWindowThenRollsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Style: StyleGitHub, Limit: 3, Window: time.Minute})
		for range 3 {
			if got := get(t, s, "/", 0).StatusCode; got != 200 {
				t.Fatalf("got %v, want %v", got, 200)
			}
		}
		if got := get(t, s, "/", 0).StatusCode; got != 429 {
			t.Fatalf("got %v, want %v", got, 429)
		}
		time.Sleep(time.Minute)
		if got := get(t, s, "/", 0).StatusCode; got != 200 {
			t.Fatalf("got %v, want %v", got, 200)
		}
		st := s.Stats()
		if got := st.Requests; got != 5 {
			t.Fatalf("got %v, want %v", got, 5)
		}
		if got := st.OK; got != 4 {
			t.Fatalf("got %v, want %v", got, 4)
		}
		if got := st.Throttled; got != 1 {
			t.Fatalf("got %v, want %v", got, 1)
		}
	})
}
