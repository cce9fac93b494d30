package response

import (
	"bytes"
	"time"

	"github.com/pacer-go/pacer/internal/header"
)

// Google's error details (google.rpc.Status, https://cloud.google.com/apis/design/errors;
// the messages of google/rpc/error_details.proto): a wait in RetryInfo, the
// quotas a request violated in QuotaFailure, and in ErrorInfo the limit
// refused and, from the Gemini Code Assist backend, when it resets.

// detail is one element of google.rpc.Status's details, as written.
type detail struct {
	typ        []byte // "@type"
	retryDelay []byte // RetryInfo
	violations []byte // QuotaFailure
	reason     []byte // ErrorInfo
	metadata   []byte // ErrorInfo
}

// google reads the details array of a google.rpc.Status.
func (r *bodyReader) google(qs *header.Quotas, details []byte) {
	elements(details, func(v []byte) bool {
		var d detail
		members(v, func(k, v []byte) bool {
			switch string(k) {
			case "@type":
				d.typ, _ = str(v)
			case "retryDelay":
				d.retryDelay, _ = str(v)
			case "violations":
				d.violations = v
			case "reason":
				d.reason, _ = str(v)
			case "metadata":
				d.metadata = v
			}
			return true
		})
		switch {
		case bytes.HasSuffix(d.typ, []byte("google.rpc.RetryInfo")):
			if s, ok := protoDuration(d.retryDelay); ok {
				r.wait = max(r.wait, s)
			}
		case bytes.HasSuffix(d.typ, []byte("google.rpc.QuotaFailure")):
			elements(d.violations, func(v []byte) bool {
				r.violation(qs, v)
				return true
			})
		case bytes.HasSuffix(d.typ, []byte("google.rpc.ErrorInfo")):
			r.errorInfo(qs, d.reason, d.metadata)
		}
		return true
	})
}

// violation reads a QuotaFailure violation: the quota it names (quotaId,
// else quotaMetric, else subject) is spent, a quota per violation. Its
// window is the one its id names (PerMinute, PerDay…), its unit tokens
// where its id or metric counts tokens, its limit quotaValue (an int64,
// which proto3's JSON writes as a string). A per-day quota resets at
// midnight Pacific time (googleDay).
func (r *bodyReader) violation(qs *header.Quotas, v []byte) {
	var id, metric, subject, value []byte
	members(v, func(k, v []byte) bool {
		switch string(k) {
		case "quotaId":
			id, _ = str(v)
		case "quotaMetric":
			metric, _ = str(v)
		case "subject":
			subject, _ = str(v)
		case "quotaValue":
			if s, ok := str(v); ok {
				value = s
			} else {
				value = v
			}
		}
		return true
	})
	name := id
	if name == nil {
		name = metric
	}
	if name == nil {
		name = subject
	}
	var q header.Quota
	if q.Name = quotaName(name); q.Name == "" {
		return // nothing to follow the quota by
	}
	q.Remaining = 0
	if n, ok := header.ParseDecimal(string(value)); ok && n < 1e15 {
		q.Limit = n
	}
	q.Window = windowOf(id)
	if countsTokens(id) || countsTokens(metric) {
		q.Unit = header.Tokens
	}
	if q.Window == 24*time.Hour {
		q.Reset = r.googleDay()
	}
	r.add(qs, &q)
}

// errorInfo reads an ErrorInfo: a limit refused (reason RATE_LIMIT_EXCEEDED
// with metadata.quota_limit, and quota_limit_value where given), or a quota
// exhausted until a reset stated in its metadata (the Gemini Code Assist
// backend's reason QUOTA_EXHAUSTED: quotaResetDelay, a Duration, and
// quotaResetTimeStamp, RFC 3339; the quota named by metadata.model). Either
// is a spent quota, named by quota_limit, else by model.
func (r *bodyReader) errorInfo(qs *header.Quotas, reason, metadata []byte) {
	var limit, value, model, delay, stamp []byte
	members(metadata, func(k, v []byte) bool {
		s, _ := str(v)
		switch string(k) {
		case "quota_limit":
			limit = s
		case "quota_limit_value":
			value = s
		case "model":
			model = s
		case "quotaResetDelay":
			delay = s
		case "quotaResetTimeStamp":
			stamp = s
		}
		return true
	})
	switch string(reason) {
	case "RATE_LIMIT_EXCEEDED", "QUOTA_EXHAUSTED", "RESOURCE_EXHAUSTED":
	default:
		return
	}
	name := limit
	if name == nil {
		name = model
	}
	var q header.Quota
	if q.Name = quotaName(name); q.Name == "" || limit == nil && delay == nil && stamp == nil {
		return
	}
	q.Remaining, q.Window = 0, windowOf(limit)
	if countsTokens(limit) {
		q.Unit = header.Tokens
	}
	if n, ok := header.ParseDecimal(string(value)); ok && n < 1e15 {
		q.Limit = n
	}
	if s, ok := protoDuration(delay); ok {
		q.Reset = r.resetAfter(s) // relative: immune to the clocks' offset
	} else if t, err := time.Parse(time.RFC3339Nano, string(stamp)); err == nil {
		q.Reset, _ = r.resetAt(t)
	} else if q.Window == 24*time.Hour {
		q.Reset = r.googleDay()
	}
	r.add(qs, &q)
}

// googleDay is when a Google per-day quota resets, in our clock: at
// midnight Pacific time ("Requests per day (RPD) quotas reset at midnight
// Pacific time", https://ai.google.dev/gemini-api/docs/rate-limits; "the
// day ends at midnight Pacific time", as Google's APIs count days, e.g.
// https://developers.google.com/android-publisher/quotas).
func (r *bodyReader) googleDay() time.Time {
	at := r.serverNow()
	return r.now.Add(nextPacificMidnight(at).Sub(at))
}

// protoDuration reads a google.protobuf.Duration in its JSON form: decimal
// seconds, at most nanosecond precision, and "s" ("37s", "2.463586755s");
// negative durations are no wait, and false.
func protoDuration(b []byte) (float64, bool) {
	secs, ok := bytes.CutSuffix(b, []byte("s"))
	if !ok {
		return 0, false
	}
	return header.ParseDecimal(string(secs))
}

// countsTokens reports whether a quota's id or metric names tokens
// (GenerateContentInputTokensPerModelPerMinute, …_input_token_count).
func countsTokens(b []byte) bool {
	return indexFold(b, "token") >= 0
}

// nextPacificMidnight is the first midnight in US Pacific time after t: at
// UTC-8 (PST) or, from the second Sunday of March at 2:00 PST to the first
// Sunday of November at 2:00 PDT, UTC-7 (PDT), the United States' rule
// since 2007 (15 U.S.C. 260a). Computed, not looked up: a library cannot
// count on the time zone database being installed.
func nextPacificMidnight(t time.Time) time.Time {
	local := t.UTC().Add(pacificOffset(t))
	y, m, d := local.Date()
	wall := time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC) // the next midnight on Pacific clocks
	// Midnight is never within a change (they happen at 2:00): the
	// offset at that instant is the one assumed, PST unless it is PDT.
	if at := wall.Add(8 * time.Hour); pacificOffset(at) != -7*time.Hour {
		return at
	}
	return wall.Add(7 * time.Hour)
}

// pacificOffset is US Pacific time's offset from UTC at t.
func pacificOffset(t time.Time) time.Duration {
	u := t.UTC()
	y := u.Year()
	start := time.Date(y, time.March, nthSunday(y, time.March, 2), 10, 0, 0, 0, time.UTC)    // 2:00 PST
	end := time.Date(y, time.November, nthSunday(y, time.November, 1), 9, 0, 0, 0, time.UTC) // 2:00 PDT
	if !u.Before(start) && u.Before(end) {
		return -7 * time.Hour
	}
	return -8 * time.Hour
}

// nthSunday is the day of month of the n-th Sunday of month m in year y.
func nthSunday(y int, m time.Month, n int) int {
	first := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Weekday()
	return 1 + (7-int(first))%7 + 7*(n-1)
}
