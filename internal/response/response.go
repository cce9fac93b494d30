package response

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
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
	// TooLarge: the request is larger than the whole limit that refused
	// it ("Limit 7000, Used 0, Requested ~12903" in an OpenAI-style
	// message, as Groq sends it): it never fits, however long it waits,
	// and the endpoint has room for others. No wait, no retry; the
	// caller gets the refusal at once.
	TooLarge
	// Upstream: a gateway relays a refusal by the provider it routed the
	// request to (OpenRouter's "Provider returned error", naming the
	// provider in error.metadata.provider_name): throttled, but not by a
	// quota of the caller's, and with no wait known unless one is
	// forwarded. Retried as load shed is (Meaning.Overloaded).
	Upstream
)

var signalNames = [...]string{"none", "body-limit", "gone", "too-large", "upstream"}

// String returns "none", "body-limit", "gone", "too-large" or "upstream".
func (s Signal) String() string {
	if int(s) < len(signalNames) {
		return signalNames[s]
	}
	return fmt.Sprintf("signal(%d)", uint8(s))
}

// Classify is what a body's peeked prefix (Peek) says of the limit by its
// phrases and error codes alone: None, BodyLimit or Gone. (Read tells
// TooLarge and Upstream from the error object.)
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
