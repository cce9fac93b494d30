package pacer

import (
	"bytes"
	"io"
	"net/http"
)

// bodyPeek is how much of a candidate response's body the classifier reads:
// GitHub's and OpenAI's error objects state their kind in the first few
// hundred bytes. 4 KiB bounds what a hostile or huge body can cost.
const bodyPeek = 4 << 10

// bodySignal reads what a 403 or 429 says only in its body: a limit no
// header states (GitHub's secondary rate limits, abuse detection) or a quota
// gone for good (OpenAI's insufficient_quota and billing limits). It reads
// at most bodyPeek bytes and puts them back: the caller gets the body byte
// for byte. Other statuses, and bodies that say neither, give signalNone.
func bodySignal(resp *http.Response) signal {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return signalNone
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		return signalNone
	}
	prefix, err := io.ReadAll(io.LimitReader(resp.Body, bodyPeek))
	resp.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(prefix), errReader{err}, resp.Body), closer: resp.Body}
	return classifyBody(prefix)
}

// classifyBody is bodySignal's decision on a body prefix.
func classifyBody(b []byte) signal {
	lower := bytes.ToLower(b)
	for _, gone := range [...]string{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"} {
		if bytes.Contains(lower, []byte(gone)) {
			return signalGone
		}
	}
	for _, limit := range [...]string{"secondary rate limit", "abuse detection", "rate_limited"} {
		if bytes.Contains(lower, []byte(limit)) {
			return signalBodyLimit
		}
	}
	return signalNone
}

// peekedBody is a response body whose first bytes were read by the
// classifier and are served again before the rest.
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
