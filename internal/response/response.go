package response

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/pacer-go/pacer/internal/header"
)

// PeekLimit is how much of a body Peek reads: GitHub's and OpenAI's error
// objects state their kind in the first few hundred bytes. 4 KiB bounds
// what a hostile or huge body can cost.
const PeekLimit = 4 << 10

// Peek returns the first bytes of a 403's or 429's body, at most
// PeekLimit, and puts them back: resp.Body then serves the body byte for
// byte, the read error included, and closes the original. Other statuses,
// and empty bodies, give nil, unread.
func Peek(resp *http.Response) []byte {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return nil
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	prefix, err := io.ReadAll(io.LimitReader(resp.Body, PeekLimit))
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(prefix), errReader{err}, resp.Body), closer: resp.Body}
	return prefix
}

// peekedBody is a response body whose first bytes were read by Peek and
// are served again before the rest.
type peekedBody struct {
	io.Reader
	closer io.Closer
}

func (b *peekedBody) Close() error { return b.closer.Close() }

// errReader returns err once the peeked bytes are served (nil: read on).
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}

// Signal is what a body says of the rate limit.
type Signal uint8

const (
	// None: the body says nothing about the rate limit.
	None Signal = iota
	// BodyLimit: a limit stated only in the body (GitHub's "You have
	// exceeded a secondary rate limit" on a 403 or 429, GraphQL
	// RATE_LIMITED errors), which GitHub documents as waited out: at least
	// 60 s without a Retry-After, then exponential backoff.
	BodyLimit
	// Gone: the quota is gone for good (OpenAI's insufficient_quota, a
	// billing hard limit): waiting cannot help.
	Gone
)

var signalNames = [...]string{"none", "body-limit", "gone"}

// String returns "none", "body-limit" or "gone".
func (s Signal) String() string {
	if int(s) < len(signalNames) {
		return signalNames[s]
	}
	return fmt.Sprintf("signal(%d)", uint8(s))
}

// Classify is what a body's peeked prefix (Peek) says of the limit.
func Classify(b []byte) Signal {
	if len(b) == 0 {
		return None // nearly every response: nothing was peeked
	}
	lower := bytes.ToLower(b)
	for _, gone := range [...]string{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"} {
		if bytes.Contains(lower, []byte(gone)) {
			return Gone
		}
	}
	for _, limit := range [...]string{"secondary rate limit", "abuse detection", "rate_limited"} {
		if bytes.Contains(lower, []byte(limit)) {
			return BodyLimit
		}
	}
	return None
}

// RetryDelay finds the wait a Google API error (Gemini's 429
// RESOURCE_EXHAUSTED) states only in its body, in seconds: the retryDelay
// of a google.rpc.RetryInfo detail, a protobuf Duration in its JSON form,
// decimal seconds and an "s" ("37s", "1.5s"):
//
//	{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
//	  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}
//
// b is the body's peeked prefix; false when it holds no RetryInfo, or a
// retryDelay that is not such a duration (a negative one, a number). A
// digit string too long for a float64 is +Inf, for the caller to clamp.
func RetryDelay(b []byte) (float64, bool) {
	// Nearly every response: nothing was peeked (Peek reads only a 403's
	// or 429's body), and a search of nothing is a call for nothing.
	if len(b) == 0 || !bytes.Contains(b, []byte("google.rpc.RetryInfo")) {
		return 0, false
	}
	const key = `"retryDelay"`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	v, ok := bytes.CutPrefix(bytes.TrimLeft(b[i+len(key):], jsonSpace), []byte(":"))
	if !ok {
		return 0, false
	}
	if v, ok = bytes.CutPrefix(bytes.TrimLeft(v, jsonSpace), []byte(`"`)); !ok {
		return 0, false
	}
	end := bytes.IndexByte(v, '"')
	if end < 0 {
		return 0, false
	}
	secs, ok := bytes.CutSuffix(v[:end], []byte("s"))
	if !ok {
		return 0, false
	}
	return header.ParseDecimal(string(secs))
}

// jsonSpace is the whitespace JSON allows before a token.
const jsonSpace = " \t\n\r"
