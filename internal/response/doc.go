// Package response reads a response once for what it means to the rate
// limit: [Read] turns it into a [Meaning] that every consumer takes as it
// is (the limiter, the retry decision, the metrics), so that no two of them
// can disagree on whether it was throttled.
//
// A Meaning holds what the headers state (package header's grammar: the
// quotas, the wait, a server-named bucket), with the absolute resets a
// server states in its own clock moved into ours by a [Clock], which bounds
// the server's offset from below from the Date every response carries (an
// HTTP-date, or X's with "UTC" for "GMT"); what a refusal's body says that
// no header does; and the one rule for "throttled": a 429, a 503 or
// Anthropic's 529, a 403 with a wait or a spent quota, or a limit the body
// states, never a refusal no wait lifts (a quota gone for good, a request
// larger than the limit). [Meaning.Overloaded] tells load shed by a server,
// or by the provider behind a gateway, from a rate limit.
//
// # Waits
//
// A Retry-After (Retry-After-Ms, X-Ms-Retry-After-Ms) on a 1xx or 2xx is no
// wait: RFC 9110 section 10.2.3 defines the field for 503 and 3xx
// responses, RFC 6585 for 429, and Hugging Face's router and Anthropic send
// it on successes. A wait a refusal's body states (below) counts beside the
// headers': the longer of the two is the wait, so that neither is waited
// out early. No wait is read for a request larger than the limit.
//
// # Bodies
//
// Only the bodies of 403s and 429s are read, and only their first
// [PeekLimit] bytes, so a huge or hostile body costs at most that; the
// bytes are put back, and the caller reads the body byte for byte as the
// server sent it ([Peek]). No other response's body is read, copied or
// wrapped, but for a stream's (below). [Classify] looks for the phrases and
// error codes the providers document, case-insensitively: a quota gone for
// good (OpenAI's insufficient_quota and billing limits) before a limit only
// the body names (GitHub's secondary rate limits and abuse detection,
// GraphQL's RATE_LIMITED). Then the prefix is walked as JSON, as far as it
// goes and without decoding it (a value cut short is read as far as the
// prefix holds it; an escaped key or name matches nothing), for the error
// object each provider documents, wrapped in {"error": …} or not, or the
// first of an array of them:
//
//   - Google (google.rpc.Status, https://cloud.google.com/apis/design/errors):
//     RetryInfo's retryDelay is a wait (a protobuf Duration, "2.463586755s",
//     to the nanosecond). Each QuotaFailure violation is a quota spent,
//     named by its quotaId (else quotaMetric, subject), of the window its
//     id names (PerMinute, PerHour, PerDay, Per100Seconds), counting
//     tokens when its id or metric names them, its Limit the quotaValue
//     (an int64, written as a string). An ErrorInfo with reason
//     RATE_LIMIT_EXCEEDED and metadata.quota_limit (and quota_limit_value)
//     is one too, as is the Gemini Code Assist backend's QUOTA_EXHAUSTED
//     with quotaResetDelay (a Duration, read as a reset from now, immune to
//     the clocks' offset) or quotaResetTimeStamp (RFC 3339, in the
//     server's clock), named by metadata.model. A spent per-day quota
//     whose reset is not stated resets at midnight Pacific time ("Requests
//     per day (RPD) quotas reset at midnight Pacific time",
//     https://ai.google.dev/gemini-api/docs/rate-limits), computed from the
//     United States' daylight-saving rule, not the time zone database: a
//     daily quota spent holds requests until then, not for the seconds its
//     RetryInfo names. A quota id names a quota per model: an endpoint
//     keyed by host shares it among models (give each model's route its
//     own endpoint to keep them apart).
//   - OpenAI's rate-limit message, which Groq's OpenAI-compatible API
//     sends too: "… on tokens per minute (TPM): Limit 15000, Used 11972,
//     Requested 4351. Please try again in 5.289s." is a quota of the
//     abbreviation's window and unit (RPM, RPD, TPM, TPD, ITPM, OTPM, IPM;
//     Groq's audio seconds ASH, ASD count as tokens do), its Limit as
//     stated, Remaining the Limit less what is Used; the wait is the Go
//     duration after "try again in" (or Gemini's "retry in"). A request
//     larger than the whole limit ("Requested ~12903" against "Limit
//     7000", "~" marking the server's estimate) never fits: the body says
//     [TooLarge], the response is not throttled and states no wait, and
//     the Transport returns it at once, without retrying it or pausing the
//     endpoint, which has room for other requests.
//   - OpenRouter (https://openrouter.ai/docs/api-reference/errors): the
//     headers it forwards inside the error (error.metadata.headers, its
//     X-RateLimit-Reset in epoch milliseconds, or an upstream's
//     Retry-After) are read by the header grammar, every convention's rules
//     applying; their quota takes the name of the limit the message names
//     ("Rate limit exceeded: limit_rpm/…") and the window the name states.
//     A limit named with no figure beside it ("free-models-per-day", its
//     daily cap for free models, https://openrouter.ai/docs/api-reference/limits)
//     is a quota spent, of that window, with no reset (OpenRouter states
//     none). "Provider returned error" with metadata.provider_name is the
//     upstream's refusal relayed ([Upstream]): throttled, not by a quota
//     of the caller's, no wait known unless one is forwarded, and retried
//     as load shed is.
//   - Discord (https://discord.com/developers/docs/topics/rate-limits):
//     retry_after, float seconds, is a wait; "global": true makes Info's
//     Global.
//
// A quota the body states joins those the headers state unless the headers
// state it already (the same unit and limit: the headers' reading stands);
// two body quotas of one name are one. Names are at most 256 visible ASCII
// characters as written; counts are plain decimals below 10^15; waits and
// resets are clamped as the headers' are. Reading a body never panics, and
// costs no allocation for a response that is no refusal.
//
// # Streams
//
// A 2xx text/event-stream ([Stream]) may carry a refusal as its first event
// (Vertex AI's `data: {"error": {"code": 429, "status":
// "RESOURCE_EXHAUSTED", …}}`; OpenRouter's and Anthropic's in-stream
// errors). Its body is not read before the caller gets it: the first event
// comes with the model's first output, seconds or minutes after the
// headers, and a caller that asked for a stream wants it at once. [Watch]
// has the caller's own reads looked at instead: the first data line they
// bring, within PeekLimit bytes, is read as a refusal's body is, and a
// refusal there (an error whose code, status or type is a refusal's) is
// reported then, with the status it stands for, to the endpoint's limiter.
// The caller reads the stream byte for byte; the request is not retried.
// The Content-Type tells a stream; a 2xx that states no type at all is
// watched too, and read only if its first line is an event stream's (a
// recorder or a proxy that drops the type still carries the refusal).
package response
