// Package response reads a response once for what it means to the rate
// limit: [Read] turns it into a [Meaning] that every consumer takes as it
// is (the limiter, the retry decision, the metrics), so that no two of them
// can disagree on whether it was throttled.
//
// A Meaning holds what the headers state (package header's grammar: the
// quotas, the wait, a server-named bucket), with the absolute resets a
// server states in its own clock moved into ours by a [Clock], which bounds
// the server's offset from below from the Date every response carries; what
// a refusal's body says that no header does; and the one rule for
// "throttled": a 429, a 503 or Anthropic's 529, a 403 with a wait or a
// spent quota, or a limit the body states, never a quota gone for good.
// [Meaning.Overloaded] tells load shed by a server from a rate limit.
//
// Bodies: only those of 403s and 429s are read, and only their first
// [PeekLimit] bytes, so a huge or hostile body costs at most that; the
// bytes are put back, and the caller reads the body byte for byte as the
// server sent it ([Peek]). What the prefix says is read from it as text,
// without decoding the JSON: [Classify] looks for the phrases and error
// codes the providers document, case-insensitively, a quota gone for good
// (OpenAI's insufficient_quota and billing limits) before a limit only the
// body names (GitHub's secondary rate limits and abuse detection, GraphQL's
// RATE_LIMITED); [RetryDelay] takes the retryDelay of a body that names
// google.rpc.RetryInfo, a protobuf Duration in its JSON form ("37s",
// "1.5s"), which Gemini sends instead of a Retry-After.
package response
