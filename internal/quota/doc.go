// Package quota models one quota a server states (or a limiter infers, or
// a client states ahead of any response: [Stated]): what new requests may
// still spend of it now, and when to look again.
//
// The model is a state machine with explicit time. [Window.Observe] folds in
// what a response said of the quota ([Report]) together with what the
// limiter knew then ([Seen]); [Window.Roll] moves a window whose reset has
// passed on to the next; [Window.Plan] says at what rate the budget may be
// spent from now and, when it is spent, when it can next take a request
// ([Window.WakeAt]). [Window.Charge] and [Window.Refund] move the budget as
// requests are admitted and given back. Nothing here reads a clock, takes a
// lock or calls out: the caller owns the time, the lock and the effects, so
// every transition can be tested with written-out times.
//
// # The budget
//
// A quota's budget is a lower bound on what new requests may still spend:
// the lowest Remaining the current window has reported, less everything
// admitted but not yet answered (the server may not have counted it), then
// charged for every request admitted. A response lowers it at once. One
// that would raise it is believed only when it can be news: concurrent
// requests are answered out of order, and a window that only counts down
// to its reset reports its freshest figure as its lowest. A request whose
// cost the budget covers goes at once: while the quota affords the work,
// the limiter is as fast as no limiter.
//
// # What the quota does by itself
//
// The drift is what changes the quota besides the limiter's own spending:
// negative when others spend from it (another process with the same key),
// positive when it refills within a window (a sliding window, a token
// bucket, a leaky bucket). It is measured from the gap between what a
// response says and what the budget predicted since the window's first
// response, beyond the noise of the requests in flight at either end. Others'
// measured spending until the reset is left to them (at most nine tenths of
// what is left); a quota others spend from is spread evenly to its reset, not
// taken at once, since two clients that each took what is left at once would
// take it twice.
//
// A bucket that states its reset as the time until it is full again
// (OpenAI's and Anthropic's token buckets) states its refill too: Limit −
// Remaining over that time. Once its resets are seen to move as that
// reading predicts, the refill is read from the responses, not measured,
// and no look is taken at it: the budget refills at that rate. What such a
// bucket was last said to hold goes at once (Step.AtOnce: a job it affords
// is as fast as with no limiter), and only the refill credited since is
// paced: credited at once, a refill an unseen client shares would be spent
// twice. A leaky bucket with no reset (Shopify's) goes so too: what it
// holds is stated, only its refill is measured. A smooth quota read so
// because a reset showed no jump is spread whole: a fixed window misread
// so has a phantom refill, which a pace finds out before a 429 and a
// burst does not.
//
// # Token quotas
//
// A request with a stated cost takes that cost from every token quota. A
// stated cost is an estimate: a charge leaves room, beyond the reserve, for
// the stated costs in flight to fall short (estimateError of them), since a
// budget spent at once is all in flight before any figure counts it; past
// that, requests wait for the answers, whose figures say what was charged. One
// without (a blind request) takes what blind requests were learnt to cost
// that quota: how far its Remaining fell between responses, plus what it
// refilled, less the stated costs answered in between, over the blind
// requests answered in between; charged high (two deviations above the
// mean), since every response trues the budget up to what the server
// counted.
//
// # Windows
//
// A window's kind is learnt at its first reset: a fixed window jumps back to
// its limit, a smooth one (a token bucket, a sliding window) does not. The
// reset a fixed window rolls at is the earliest one its responses stated
// (servers round resets up); consecutive windows' resets teach the window's
// length when no policy states it, and whole-second resets teach its phase.
// When a reset passes, one request looks at the new window unless the old
// one ended with room to spare, and its answer sets the new budget: the look
// costs a round trip per window and saves a burst into a window that did not
// refill after all. A reset that no stated or learnt window length explains
// is believed only up to MaxDelay; then one request looks.
//
// Budgets are kept in milli-units (fixed point), so that charges and
// refunds of whole requests cancel exactly.
package quota
