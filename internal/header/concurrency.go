package header

import (
	"net/http"
	"strings"

	"github.com/pacer-go/pacer/internal/header/sfv"
)

// maxConcurrency bounds a stated concurrency quota: a larger one is read
// as this, which no client's bound reaches.
const maxConcurrency = 1 << 20

// Concurrency returns the concurrency quota h states: the smallest q of an
// IETF RateLimit-Policy whose unit is qu="concurrent-requests" (draft-08
// and later), such as `"conc";q=10;qu="concurrent-requests"`; ok is false
// when h states none. A quota below 1 or not a number is no quota; one
// above maxConcurrency is clamped to it. Parse matches such policies but
// reports only quotas of requests and tokens over time, so a client that
// bounds its concurrency asks here; the field is found under any case of
// its name, the canonical one first.
func Concurrency(h http.Header) (limit int, ok bool) {
	vs := h["Ratelimit-Policy"]
	if vs == nil {
		for k, v := range h {
			if len(k) == len("ratelimit-policy") && strings.EqualFold(k, "ratelimit-policy") {
				vs = v
				break
			}
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	v := vs[0]
	if len(vs) > 1 {
		v = strings.Join(vs, ", ")
	}
	sfv.Each(v, false, func(m sfv.Member) bool {
		params := ietfParamsOf(m.Params)
		if unit, _ := params.qu.Name(); unit != "concurrent-requests" {
			return true
		}
		q, isNum := params.q.Number()
		if !isNum || q < 1 {
			return true
		}
		n := int(min(q, maxConcurrency))
		if !ok || n < limit {
			limit, ok = n, true
		}
		return true
	})
	return limit, ok
}
