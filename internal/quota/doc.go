// Package quota models the quotas a server states (or the limiter infers,
// or a client states ahead of any response: [Stated]): what new requests may
// still spend of each now, and when to look again.
//
// A [State] is one quota with explicit time, as x/time/rate's advance(t) is;
// a [Book] is an endpoint's quotas. The package takes no lock, reads no
// clock and calls out to nothing: the caller owns the time, the lock and the
// effects. A quota's budget is a lower bound on what new requests may spend
// (R1): a request it covers goes at once, one it does not waits for the
// quota to come back, as its [Kind] does.
//
// # Rules
//
// Every rule the model applies, one line each with its reason; the code and
// the tests' why cite them by number. R52-R66 are what the limiter around
// the model (package pacer) applies. When this table was first written
// (issue 36) the model and the limiter applied 68 rules, of which the
// package docs stated about 12; 63 are left, numbered as they were. R17,
// R21, R30, parts of R35 and R38 and two rules before the numbering went,
// since neither the recorded sessions' replay, bench/ nor a scenario test
// needed them; the commits that removed them say what they did.
//
// The budget:
//   - R1 The budget is the lowest Remaining stated, less what is in flight and others' spending over the figure's age: the server may not have counted those yet.
//   - R2 A request goes at once when every known quota's budget covers it: a job the quota affords is as fast as no limiter.
//   - R3 A request quota costs 1; a token quota the stated cost, at most its limit: a dearer request would wait for ever.
//   - R4 A token quota keeps (1 − safety) of its limit back: stated costs are estimates.
//   - R5 A token charge also leaves 0.3 of the stated costs in flight while others are out: a budget spent at once is in flight before any figure counts it.
//   - R6 What a charge keeps is at most the limit less a unit: a full quota always takes a request.
//   - R7 Batch work leaves its class's reserve of each quota, but not of a quota being looked at: the look must go.
//
// Reading a figure:
//   - R8 Counts that are not finite or are negative are dropped, Remaining clamped to Limit, resets to the horizon, quotas beyond 16 ignored: hostile headers are never trusted.
//   - R9 A report without Remaining, or without a reset and full, is a policy: it teaches limit and window, not a budget.
//   - R10 A report whose reset has passed describes a window that is over: ignored.
//   - R11 A lower figure lowers the budget at once; a higher one of a window that counts down is an overtaken answer, but with nothing in flight the lowest is exact.
//   - R12 A higher figure of a quota that refills is believed only from a request admitted after the budget was set (else once the budget is a horizon old); a burst's lowest figure is a lower bound once the burst is in.
//
// Windows and resets:
//   - R13 Stated resets within 4 jitters (10 ms to 1 s, at most a quarter window) are one window's: servers round and latency wanders.
//   - R14 A reset restated later while the window's is a few seconds ahead, within a second's rounding and not as a time to full moves, is the same reset: Reddit's delta seconds, Mastodon's microseconds (not a bucket of a second's, whose time to full is always a second ahead).
//   - R15 A fixed window ends at the earliest reset its answers stated when surely the same window, else the latest: servers round resets up.
//   - R16 A window's length is its policy's, else the advance between consecutive windows' resets once the old passed (half to 1.5 of the length known): no server states both.
//
// Kinds (the classify step):
//   - R18 A quota that states no reset is a leaky bucket (Leaky): it refills as it goes.
//   - R19 At a reset that left a tenth of the limit to tell, a jump of half the room and more than in flight is a fixed window, none a sliding one, unless shared or nothing is left: others may have emptied the new window. A window answering past its first stated reset, that reset moved on, is sliding: a fixed window's reset does not outrun itself.
//   - R20 A reset that moved later before the old passed, by what the spending since refills at the rate both ends state, is a bucket's time to full (ToFull).
//   - R22 Two moved resets in a row where the last rate predicts make ToFull; one that does not, or a reset that stays while time passes, undoes it: one may fit by chance.
//   - R23 A coordinated quota not known to refill is not read as ToFull: the fleet's store keeps its budget.
//
// Rolling over:
//   - R24 A window rolls 10 ms after its reset, on by whole windows when its length is known: a carried reset drifts by its rounding.
//   - R25 A window that ended with room keeps that, less two units, with no look (unless shared): the next window has at least that.
//   - R26 Otherwise a fixed window's first request is a look of one unit, whose answer sets the budget; a look with nothing of ours out goes again: a window that did not refill costs one 429, not a burst.
//   - R27 A window of unknown kind ending spent looks 2 × window/limit (at most 1 s) after its reset: a sliding window has room again by then.
//   - R28 A ToFull bucket at its reset is full, less what is in flight: no look.
//   - R29 A quota that refills, with less than a unit above its keep at its reset, is looked at: nothing else would tell it refilled.
//   - R31 A quota rolled blind that the next answer does not describe is forgotten: the server stopped speaking of it.
//   - R32 A reset no stated or learnt length explains (within 5% and a second) is believed only up to MaxDelay; then one request looks.
//
// Others' spending and refill (the drift):
//   - R33 The drift is the gap between a figure and the baseline less our spending since, beyond the noise of what was in flight at either end, over at least 2 horizons, 250 ms and a tenth of the window (not for the first measure of a quota just seen shared, nor of a bucket that states its refill); a refill only of a quota known to refill: a higher figure of one that counts down is overtaken (R11).
//   - R34 A drain is at most what the quota's long-run rate leaves us (above it the baseline erred); only between answers, while the window's length is unknown, does the budget fall by the drain as measured: fifty clients spend an hour's window in 20 s. Not a route's quota our other routes spend (Routed): theirs waits on our callers.
//   - R35 A quota is shared when a drain is measured, a figure is a unit below the budget (beyond what feeding limiters have out), or a request quota refuses with budget left.
//   - R36 A drift no response confirmed halves every window (a second at least; one of unstated length is its first answer's time to reset, after its roll too); a stated refill does not age: others' old burst must not hold us back for ever, nor a wait for the reset wipe what others spend.
//   - R37 A refill raises the budget by safety × drift, to the limit; a drain lowers it by at most 0.9 of the last figure, and admission deducts it between plans, but of a keep at its cap (R41) only the client's tenth: the keep is a share of a budget that fell too.
//   - R38 A fresh fixed window carries others' drain, not a refill: others spend on across its reset, and it does not refill.
//   - R39 An inferred or coordinated quota forgets others; a fleet's measures no drift: their spending is the count's error, or the store's to hold.
//
// Planning a rate:
//   - R40 A known quota with a unit above its keep, neither refilling nor shared, is spent at once: the budget, not a rate, is the gate.
//   - R41 A charge keeps the token reserve, a unit of a quota that refills, and others' drain until the reset (at most 0.9 of the budget): each client's floor is a tenth.
//   - R42 A refilling quota is spread to its reset with what refills, at least a unit per span, and, its refill unstated, a unit per max(1 s, window/20): only answers show the refill.
//   - R43 A shared quota is spread to its reset; past 5 times the last pace each claims its share of the surplus; a unit per max(1 s, window/20) while 2 are left: two clients taking what is left at once take it twice.
//   - R44 A ToFull or leaky bucket nobody else spends from lets what its last figure said is left go at once, and paces only its refill: credited at once, a shared refill is spent twice. Of a ToFull bucket others spend from (a figure short of the last one topped up by the stated refill, less ours and a unit of rounding), the client's part of the refill is its share, its spending over everyone's: each read the whole as its own.
//   - R45 A fixed window others spend from builds what is left beyond their use and each client's tenth up as burst capacity (not level), in the bucket at once on its first spread.
//   - R46 A spent quota wakes at a look due first, else when its refill holds a unit (looking sooner if that is a reprobe away), at its reset + 10 ms (one that refills too once a refusal left it nothing: the refusal's reset is when it has room), or looks after a reprobe (1 s without a reset).
//
// What a request with no stated cost (a blind one) costs a token quota:
//   - R47 Its cost is Remaining's fall between answers, plus the stated refill (never past the limit), less stated costs, over the blind requests answered: at least 8 (the first 2), and twice those in flight.
//   - R48 The first look, one blind request alone on a quota at least half full, is the first sample: Limit − Remaining.
//   - R49 No sample is taken across fixed windows, of an unstated refill, of a full quota or of a refusal; counts that went back restart it.
//   - R50 The estimate weighs about 16 requests, its variance 4 samples (the first deviation half the mean); a blind request is charged the mean plus 2 deviations: a dear request is refused where the mean fits.
//
// Stated quotas:
//   - R51 A quota the client states counts its own answered requests in windows from its start, until the server states its own.
//
// What the limiter adds (package pacer):
//   - R52 Before the first response at most SlowStart requests are in flight: a fan-out onto a spent quota costs that many 429s.
//   - R53 While a look is out, or the server refuses everything, one request at a time; while an inferred window is on trial, a few.
//   - R54 A refusal's Retry-After pauses the endpoint, at most MaxDelay; on a 2xx it is no pause.
//   - R55 A wait past MaxWait, MaxDelay or the deadline is refused at once, but only when nothing of ours is in flight: their answers may free it.
//   - R56 A throttle no spent quota explains cuts the CUBIC fallback and holds new requests; a 503 while quotas show room does not.
//   - R57 A body-stated limit (GitHub's secondary) waits its Retry-After, else a spent quota's reset, else a minute doubling per trip (15 min, memory an hour), answers before its end being the same trip; then resumes below what the server admitted.
//   - R58 An answer the server did not count (a 429) is not counted in admissions; another limiter's answer charged here is ours: the books compare counts.
//   - R59 What feeding limiters (the host's, before a route's bucket is named) have in flight is unseen here.
//   - R60 Anthropic's tokens-* beside input- and output-tokens is ignored: it restates whichever is tighter.
//   - R61 The horizon is 2 round trips (20 ms to 2 s), a round trip Little's law: answers overtake each other by about one.
//   - R62 A new rate applies when 1% lower or 2% higher, a burst past 10%: the budgets, not the rate, keep a window from being overspent.
//   - R63 Batch work leaves work.Reserve.Share of each quota while interactive work came within Idle, else Floor.
//   - R64 A spread quota's burst is at most a second's worth and the safety factor's headroom, or what may go at once; the probe's a tenth of its rate; a ceiling caps both.
//   - R65 What may go at once is put in the bucket as its level, with the limit: carried over, the old pace's level would hold it back.
//   - R66 The largest cost seen sizes the token bucket's burst: a request too big for it would wait for ever.
package quota
