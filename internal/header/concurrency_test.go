package header

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConcurrencyReadsTheIETFConcurrentRequestsPolicy(t *testing.T) {
	tests := []struct {
		why    string
		header http.Header
		want   int // 0: none stated
	}{
		{why: "the draft's example unit", header: http.Header{"Ratelimit-Policy": {`"conc";q=10;qu="concurrent-requests"`}}, want: 10},
		{why: "beside a rate policy", header: http.Header{"Ratelimit-Policy": {`"default";q=100;w=60, "conc";q=8;qu="concurrent-requests"`}}, want: 8},
		{why: "the smallest of two", header: http.Header{"Ratelimit-Policy": {`"a";q=30;qu="concurrent-requests"`, `"b";q=12;qu="concurrent-requests"`}}, want: 12},
		{why: "a name in any case", header: http.Header{"ratelimit-policy": {`"conc";q=5;qu="concurrent-requests"`}}, want: 5},
		{why: "a decimal is floored", header: http.Header{"Ratelimit-Policy": {`"conc";q=7.9;qu="concurrent-requests"`}}, want: 7},
		{why: "a huge quota is clamped", header: http.Header{"Ratelimit-Policy": {`"conc";q=999999999999;qu="concurrent-requests"`}}, want: maxConcurrency},
		{why: "a rate policy is none", header: http.Header{"Ratelimit-Policy": {`"default";q=100;w=60`}}},
		{why: "another unit is none", header: http.Header{"Ratelimit-Policy": {`"b";q=1000;qu="content-bytes"`}}},
		{why: "a zero quota is none", header: http.Header{"Ratelimit-Policy": {`"conc";q=0;qu="concurrent-requests"`}}},
		{why: "no q is none", header: http.Header{"Ratelimit-Policy": {`"conc";qu="concurrent-requests"`}}},
		{why: "an invalid field is ignored whole", header: http.Header{"Ratelimit-Policy": {`"conc";q=10;qu="concurrent-requests", ((`}}},
		{why: "no field", header: http.Header{"X-Ratelimit-Limit": {"10"}}},
	}
	for _, tc := range tests {
		got, ok := Concurrency(tc.header)
		assert.Equal(t, tc.want, got, tc.why)
		assert.Equal(t, tc.want > 0, ok, tc.why)
	}
}

// Concurrency never panics and reports only a quota within [1, maxConcurrency].
func FuzzConcurrency(f *testing.F) {
	for _, v := range []string{`"conc";q=10;qu="concurrent-requests"`, `"a";q=5;w=60, "b";q=2.5;qu="concurrent-requests"`, `((`, `q=;qu=`} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, ok := Concurrency(http.Header{"Ratelimit-Policy": {v}})
		if ok && (n < 1 || n > maxConcurrency) {
			t.Fatalf("Concurrency(%q) = %d", v, n)
		}
		if !ok && n != 0 {
			t.Fatalf("Concurrency(%q) = %d, false", v, n)
		}
	})
}
