package pacer

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// benchNow is the moment the benchmark header sets were received.
var benchNow = time.Date(2022, 10, 18, 22, 0, 0, 0, time.UTC)

// A whole GitHub REST response header set, not just its rate-limit fields:
// ParseHeaders pays for every key it has to look at.
var benchGitHub = http.Header{
	"Date":                                   {"Tue, 18 Oct 2022 22:00:00 GMT"},
	"Content-Type":                           {"application/json; charset=utf-8"},
	"Cache-Control":                          {"private, max-age=60, s-maxage=60"},
	"Vary":                                   {"Accept, Authorization, Cookie, X-GitHub-OTP", "Accept-Encoding, Accept, X-Requested-With"},
	"Etag":                                   {`W/"d46a4b9c3e4b5b6b9d4f8b6a4c9e1f3a"`},
	"X-Oauth-Scopes":                         {"repo"},
	"X-Accepted-Oauth-Scopes":                {""},
	"Github-Authentication-Token-Expiration": {"2022-11-17 21:00:00 UTC"},
	"X-Github-Media-Type":                    {"github.v3; format=json"},
	"X-Github-Api-Version-Selected":          {"2022-11-28"},
	"X-Ratelimit-Limit":                      {"5000"},
	"X-Ratelimit-Remaining":                  {"4997"},
	"X-Ratelimit-Reset":                      {"1666132381"},
	"X-Ratelimit-Used":                       {"3"},
	"X-Ratelimit-Resource":                   {"core"},
	"Access-Control-Expose-Headers":          {"ETag, Link, Location, Retry-After, X-GitHub-OTP, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Used, X-RateLimit-Resource, X-RateLimit-Reset"},
	"Access-Control-Allow-Origin":            {"*"},
	"Strict-Transport-Security":              {"max-age=31536000; includeSubdomains; preload"},
	"X-Frame-Options":                        {"deny"},
	"X-Content-Type-Options":                 {"nosniff"},
	"X-Xss-Protection":                       {"0"},
	"Referrer-Policy":                        {"origin-when-cross-origin, strict-origin-when-cross-origin"},
	"Content-Security-Policy":                {"default-src 'none'"},
	"Server":                                 {"GitHub.com"},
	"X-Github-Request-Id":                    {"C8A6:7E4A:1B2C3D:1C2D3E:634F2E10"},
}

func BenchmarkParseHeadersGitHub(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParseHeaders(benchGitHub, benchNow); !ok {
			b.Fatal("no rate-limit information found")
		}
	}
}

// benchmarkParse parses h, received at now, b.N times.
func benchmarkParse(b *testing.B, h http.Header, now time.Time) {
	b.Helper()
	if _, ok := ParseHeaders(h, now); !ok {
		b.Fatal("no rate-limit information found")
	}
	b.ReportAllocs()
	for b.Loop() {
		ParseHeaders(h, now)
	}
}

func BenchmarkParseHeadersGitHubFieldsOnly(b *testing.B) {
	h := http.Header{}
	for k, v := range benchGitHub {
		if strings.HasPrefix(k, "X-Ratelimit-") {
			h[k] = v
		}
	}
	benchmarkParse(b, h, benchNow)
}

func BenchmarkParseHeadersIETF(b *testing.B) {
	benchmarkParse(b, http.Header{
		"Date":             {"Mon, 21 Oct 2024 09:00:00 GMT"},
		"Content-Type":     {"application/json"},
		"Server":           {"cloudflare"},
		"Cf-Ray":           {"8d6c2b1e9f0a1234-AMS"},
		"Ratelimit":        {`"burst";r=50;t=30`},
		"Ratelimit-Policy": {`"burst";q=100;w=60, "daily";q=1000;w=86400`},
	}, benchNow)
}

func BenchmarkParseHeadersIETFDraft07(b *testing.B) {
	benchmarkParse(b, http.Header{
		"Content-Type":     {"application/json"},
		"Ratelimit":        {"limit=100, remaining=50, reset=5"},
		"Ratelimit-Policy": {"100;w=10"},
	}, benchNow)
}

func BenchmarkParseHeadersOpenAI(b *testing.B) {
	benchmarkParse(b, http.Header{
		"Date":                           {"Mon, 21 Oct 2024 09:00:00 GMT"},
		"Content-Type":                   {"application/json"},
		"Openai-Organization":            {"user-abc123"},
		"Openai-Processing-Ms":           {"312"},
		"Openai-Version":                 {"2020-10-01"},
		"X-Request-Id":                   {"req_0123456789abcdef"},
		"X-Ratelimit-Limit-Requests":     {"60"},
		"X-Ratelimit-Limit-Tokens":       {"150000"},
		"X-Ratelimit-Remaining-Requests": {"59"},
		"X-Ratelimit-Remaining-Tokens":   {"149984"},
		"X-Ratelimit-Reset-Requests":     {"1s"},
		"X-Ratelimit-Reset-Tokens":       {"6m0s"},
	}, benchNow)
}

func BenchmarkParseHeadersAnthropic(b *testing.B) {
	h := http.Header{"Content-Type": {"application/json"}, "Request-Id": {"req_018EeWyXxfu5pfWkrYcMdjWG"}}
	for _, q := range []string{"Requests", "Tokens", "Input-Tokens", "Output-Tokens"} {
		h["Anthropic-Ratelimit-"+q+"-Limit"] = []string{"50000"}
		h["Anthropic-Ratelimit-"+q+"-Remaining"] = []string{"49000"}
		h["Anthropic-Ratelimit-"+q+"-Reset"] = []string{"2022-10-18T22:00:59Z"}
	}
	benchmarkParse(b, h, benchNow)
}

func BenchmarkParseHeadersNone(b *testing.B) {
	h := benchGitHub.Clone()
	for k := range h {
		if strings.HasPrefix(k, "X-Ratelimit-") {
			delete(h, k)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		ParseHeaders(h, benchNow)
	}
}
