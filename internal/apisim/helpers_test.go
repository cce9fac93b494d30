package apisim

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"
)

// getBody sends one GET through s's Transport and returns the body.
func getBody(t *testing.T, s *Server, path string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://api.test"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Transport().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// get sends one GET through s's in-memory Transport and returns the response
// (body closed), declaring tokens when > 0.
func get(t *testing.T, s *Server, path string, tokens int) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://api.test"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tokens > 0 {
		req.Header.Set(TokensHeader, strconv.Itoa(tokens))
	}
	resp, err := s.Transport().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func nan() float64 { return math.NaN() }
