package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// observed is what Observe leaves of a window: the budget (units), whether
// it speaks for the current window, whether it rolled blind and a look is
// out, the window's reset, length and kind, whether others spend from it,
// its drift (units per second), and the rate an Advance at the last event's
// time plans (0 when the window is unknown).
type observed struct {
	units   float64
	known   bool
	rolled  bool
	probing bool
	reset   time.Time
	length  time.Duration
	kind    Kind
	shared  bool
	drift   float64
	rate    float64
}

func TestObserve(t *testing.T) {
	const L = 100 // the request quota's limit in most cases
	minute := reset(time.Minute)
	cases := []struct {
		name   string
		why    string
		w      func() *State // requests() when nil
		events []event
		want   observed
	}{
		{
			name: "first report sets the budget to Remaining less Unseen",
			why: "the budget is a lower bound of what new requests may spend: the 5 requests in " +
				"flight may not be counted in the 80 yet, and may land in it",
			events: []event{obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{Unseen: 5})},
			want:   observed{units: 75, known: true, reset: minute, rate: inf},
		},
		{
			name: "a reset restated later within its rounding is the same window",
			why: "Reddit states its reset in delta seconds, Mastodon its with each request's " +
				"fraction of a second: the reset read creeps later by up to a second with no " +
				"refill behind it, however still it held before (16 answers at one instant " +
				"taught a jitter of 40 ms); read as a new window it showed no jump, and the " +
				"quota was spread as a sliding window, a job far below it 263× unpaced",
			events: func() []event {
				ev := []event{obs(0, 0, Report{Limit: L, Remaining: 90, Reset: minute}, Seen{})}
				for i := range 16 {
					ev = append(ev, obs(time.Duration(i+1)*time.Millisecond, 1,
						Report{Limit: L, Remaining: float64(89 - i), Reset: minute}, Seen{Admitted: float64(i + 1)}))
				}
				return append(ev, obs(600*time.Millisecond, 4, Report{Limit: L, Remaining: 70, Reset: minute.Add(600 * time.Millisecond)}, Seen{Admitted: 20}))
			}(),
			want: observed{units: 70, known: true, reset: minute.Add(600 * time.Millisecond), rate: inf},
		},
		{
			name: "a lower report lowers the budget at once",
			why: "a lower figure is news at once: 8 admitted, the response of one says 73 with " +
				"7 still unseen, so 66 at most are left, below the 72 the charges left",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{}),
				obs(100*time.Millisecond, 8, Report{Limit: L, Remaining: 73, Reset: minute}, Seen{Unseen: 7, Admitted: 8}),
			},
			want: observed{units: 66, known: true, reset: minute, rate: inf},
		},
		{
			name: "an overtaken higher figure of a window counting down does not raise the budget",
			why: "responses come back out of order: a window that only counts down already said " +
				"75, so a later-read 78 is older and would re-spend requests in flight",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{}),
				obs(50*time.Millisecond, 10, Report{Limit: L, Remaining: 75, Reset: minute}, Seen{Unseen: 5, Admitted: 10}),
				obs(60*time.Millisecond, 0, Report{Limit: L, Remaining: 78, Reset: minute}, Seen{Unseen: 4, Admitted: 10}),
			},
			want: observed{units: 70, known: true, reset: minute, rate: inf},
		},
		{
			name: "with nothing in flight the lowest figure becomes exact",
			why: "the 5 requests subtracted as unseen from the 75 were counted in it once nothing " +
				"is in flight: the budget is the lowest figure (75), not the overtaken one (78)",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{}),
				obs(50*time.Millisecond, 10, Report{Limit: L, Remaining: 75, Reset: minute}, Seen{Unseen: 5, Admitted: 10}),
				obs(60*time.Millisecond, 0, Report{Limit: L, Remaining: 78, Reset: minute}, Seen{Unseen: 0, Admitted: 10}),
			},
			want: observed{units: 75, known: true, reset: minute, rate: inf},
		},
		{
			name: "a bucket's lowest figure of a burst becomes exact when the burst is over",
			why: "a leaky bucket (no reset) may report more as it refills, so a higher figure " +
				"is stale while the burst is out; but once nothing is in flight, the burst's " +
				"lowest figure (14) counted every request of it: the 15 subtracted as unseen " +
				"from it left the budget at nothing while 14 were left",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 30}, Seen{}),
				obs(50*time.Millisecond, 16, Report{Limit: 40, Remaining: 14}, Seen{Unseen: 15, Admitted: 16}),
				obs(50*time.Millisecond, 0, Report{Limit: 40, Remaining: 20}, Seen{Unseen: 14, Admitted: 16}),
				obs(50*time.Millisecond, 0, Report{Limit: 40, Remaining: 29}, Seen{Unseen: 0, Admitted: 16}),
			},
			want: observed{units: 14, known: true, kind: Leaky, rate: 0.9 * 13},
		},
		{
			name: "a bucket's higher figure during a burst stays stale",
			why: "the same burst with one answer still out: the 20 may predate requests the " +
				"server counted since, so the budget stays at what the lowest figure less " +
				"the unseen left",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 30}, Seen{}),
				obs(50*time.Millisecond, 16, Report{Limit: 40, Remaining: 14}, Seen{Unseen: 15, Admitted: 16}),
				obs(50*time.Millisecond, 0, Report{Limit: 40, Remaining: 20}, Seen{Unseen: 1, Admitted: 16}),
			},
			want: observed{units: 0, known: true, kind: Leaky, rate: inf},
		},
		{
			name: "a policy-only report sets limit and window, not a budget",
			why: "Limit per Window with Remaining == Limit and no reset states a policy, not the " +
				"state of a window: the budget must not speak for a window nobody described",
			events: []event{obs(0, 0, Report{Limit: L, Remaining: L, Window: time.Minute}, Seen{})},
			want:   observed{length: time.Minute},
		},
		{
			name: "an unstated Remaining sets limit and window, not a budget",
			why: "the server stated Limit per Window and nothing of what is left (an IETF " +
				"policy with no RateLimit item): the window is neither full nor empty",
			events: []event{obs(0, 0, Report{Limit: L, Remaining: Unstated, Window: time.Minute}, Seen{})},
			want:   observed{length: time.Minute},
		},
		{
			name: "an unstated Remaining with a reset is not a full window",
			why: "a reset with no figure says when a window ends, not what it holds: taking " +
				"it for Limit would spend a window that may be empty",
			events: []event{obs(0, 0, Report{Limit: L, Remaining: Unstated, Reset: minute, Window: time.Minute}, Seen{})},
			want:   observed{length: time.Minute},
		},
		{
			name: "a refusal with Remaining unstated says nothing of others' spending",
			why: "a 429 whose report states no figure is not 'nothing left while the budget " +
				"had room': the budget and the quota's standing stay as the last figure set them",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{}),
				obs(100*time.Millisecond, 0, Report{Limit: L, Remaining: Unstated, Window: time.Minute}, Seen{Refused: true}),
			},
			want: observed{units: 80, known: true, reset: minute, length: time.Minute, rate: inf},
		},
		{
			name: "a report whose reset has passed is ignored",
			why: "parsers map past resets to now: the window it describes is over, so its low " +
				"figure (10) says nothing of the current one",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{}),
				obs(30*time.Second, 0, Report{Limit: L, Remaining: 10, Reset: reset(29 * time.Second)}, Seen{}),
			},
			want: observed{units: 80, known: true, reset: minute, rate: inf},
		},
		{
			name: "a first report of a window already over leaves the quota unknown",
			why:  "a reset at now describes a window that is over: no budget for the next",
			events: []event{
				obs(time.Second, 0, Report{Limit: L, Remaining: 0, Reset: reset(time.Second)}, Seen{}),
			},
			want: observed{},
		},
		{
			name: "a report a window later is a fresh window, and its jump marks a fixed window",
			why: "a reset a window past the last is a new window, whose figure sets the budget " +
				"even though it is higher; Remaining jumping back from 5 to 99 is a fixed " +
				"window, and the resets' cadence teaches its length",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 5, Reset: minute}, Seen{}),
				obs(61*time.Second, 0, Report{Limit: L, Remaining: 99, Reset: reset(2 * time.Minute)}, Seen{}),
			},
			want: observed{units: 99, known: true, reset: reset(2 * time.Minute), length: time.Minute, kind: Fixed, rate: inf},
		},
		{
			name: "a new window that did not jump back is smooth",
			why: "a sliding window's count carries across its reset: 5 becoming 20 is no jump " +
				"(under half the 95 spent), so the quota is spread as it refills, and a reset " +
				"that moves with it teaches no length",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 5, Reset: minute}, Seen{}),
				obs(61*time.Second, 0, Report{Limit: L, Remaining: 20, Reset: reset(2 * time.Minute)}, Seen{}),
			},
			// drift: 15 more than the 5 predicted, over 61 s; rate: the
			// floor of one look per reprobe (1 s) beats 0.9 × (19 + 15/61 × 59) / 59.
			want: observed{units: 20, known: true, reset: reset(2 * time.Minute), kind: Sliding, drift: 15.0 / 61, rate: 1},
		},
		{
			name: "a higher figure of a quota that refills is stale within Horizon",
			why: "a quota with no reset (a leaky bucket) may report more, so its lowest figure " +
				"proves nothing; a higher one 10 ms after the budget was set (Horizon 20 ms) is " +
				"taken for an overtaken response until the budget has stood that long",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 30}, Seen{}),
				obs(10*time.Millisecond, 0, Report{Limit: 40, Remaining: 35}, Seen{}),
			},
			// spread over noResetSpan, keeping a unit: 0.9 × 29 / 1 s.
			want: observed{units: 30, known: true, kind: Leaky, rate: 0.9 * 29},
		},
		{
			name: "a higher figure of a quota that refills is believed after Horizon",
			why:  "once the budget has stood for Horizon the higher figure is news: the refill",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 30}, Seen{}),
				obs(30*time.Millisecond, 0, Report{Limit: 40, Remaining: 35}, Seen{}),
			},
			want: observed{units: 35, known: true, kind: Leaky, rate: 0.9 * 34},
		},
		{
			name: "a higher figure from a request admitted before the budget was set is stale, however old the budget",
			why: "the order of admission is exact where the horizon is an estimate: request 2 " +
				"was sent before the figure the budget was set from (when 3 were admitted) came " +
				"back, so the server may have counted it first, and 35 may be the older figure",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 30}, Seen{Seq: 1, Admissions: 3}),
				obs(500*time.Millisecond, 0, Report{Limit: 40, Remaining: 35}, Seen{Seq: 2, Admissions: 3}),
			},
			want: observed{units: 30, known: true, kind: Leaky, rate: 0.9 * 29},
		},
		{
			name: "a higher figure from a request admitted after the budget was set is news at once",
			why: "request 4 left after the budget's figure came back (3 admitted then): the " +
				"server counted it after that figure, so its 35 is the fresher, horizon or not",
			events: []event{
				obs(0, 0, Report{Limit: 40, Remaining: 30}, Seen{Seq: 1, Admissions: 3}),
				obs(5*time.Millisecond, 0, Report{Limit: 40, Remaining: 35}, Seen{Seq: 4, Admissions: 4}),
			},
			want: observed{units: 35, known: true, kind: Leaky, rate: 0.9 * 34},
		},
		{
			name: "a 429 with budget left marks the quota shared",
			why: "the budget counts every request of ours, so a refusal while it held 80 means " +
				"someone else spent the quota (it counts even with fed slack, which only excuses " +
				"a lower figure); a shared quota is spread to its reset, never taken at once, " +
				"or two clients each taking what is left take it twice",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{}),
				obs(100*time.Millisecond, 0, Report{Limit: L, Remaining: 0, Reset: minute}, Seen{Refused: true, Fed: inf}),
				obs(61*time.Second, 0, Report{Limit: L, Remaining: L, Reset: reset(2 * time.Minute)}, Seen{}),
			},
			// 0.9 × 100 spread over the 59 s to the reset.
			want: observed{units: 100, known: true, reset: reset(2 * time.Minute), length: time.Minute, kind: Fixed, shared: true, rate: 0.9 * 100 / 59},
		},
		{
			name: "a 429 of the look after a reset does not mark the quota shared",
			why: "the look goes when the budget cannot speak for the window: its refusal is the " +
				"answer it was sent for, not others' spending, and says nothing of a jump",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 0, Reset: minute}, Seen{}),
				adv(time.Minute+RollGuard, Seen{}),
				adv(time.Minute+RollGuard+1200*time.Millisecond, Seen{}), // 2 × 60 s / 100 later
				obs(61300*time.Millisecond, 0, Report{Limit: L, Remaining: 0, Reset: reset(2 * time.Minute)}, Seen{Refused: true}),
			},
			want: observed{known: true, reset: reset(2 * time.Minute), length: time.Minute, rate: inf},
		},
		{
			name: "a 429 of a look for an unexplained reset does not mark the quota shared",
			why: "the look after MaxDelay goes into a window the budget said was spent: its " +
				"refusal is the answer it was sent for, not others' spending, although a token " +
				"quota's look is given the whole limit to spend and still holds room",
			w: tokenQuota,
			events: []event{
				obs(0, 0, Report{Limit: 1000, Remaining: 0, Reset: reset(10 * time.Minute)}, Seen{}),
				adv(time.Second, Seen{}),
				adv(61*time.Second, Seen{}), // MaxDelay later: the look
				obs(61100*time.Millisecond, 1, Report{Limit: 1000, Remaining: 0, Reset: reset(10 * time.Minute)}, Seen{Refused: true, Admitted: 1}),
			},
			want: observed{known: true, reset: reset(10 * time.Minute), rate: inf},
		},
		{
			name: "a 429 when the budget was already spent is no news",
			why: "only a refusal with room left by the budget shows someone else spent it; with " +
				"nothing left the budget expected it",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 0, Reset: minute}, Seen{}),
				obs(100*time.Millisecond, 0, Report{Limit: L, Remaining: 0, Reset: minute}, Seen{Refused: true}),
			},
			want: observed{known: true, reset: minute, rate: inf},
		},
		{
			name: "a look answered from a window that has not ended goes back to it",
			why: "the roll assumed a reset that was early: the look's answer states the old " +
				"window's reset still ahead, so the window is that one again until the reset it " +
				"states (nothing else would end the look)",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 10, Reset: minute}, Seen{}),
				obs(61*time.Second, 0, Report{Limit: L, Remaining: L, Reset: reset(2 * time.Minute)}, Seen{}),
				obs(90*time.Second, L, Report{Limit: L, Remaining: 0, Reset: reset(2 * time.Minute)}, Seen{Admitted: L}),
				adv(2*time.Minute+RollGuard, Seen{Admitted: L}),
				obs(120020*time.Millisecond, 1, Report{Limit: L, Remaining: 0, Reset: reset(120500 * time.Millisecond)}, Seen{Refused: true, Admitted: L + 1}),
			},
			want: observed{known: true, reset: reset(120500 * time.Millisecond), length: time.Minute, kind: Fixed, rate: inf},
		},
		{
			name: "a reset that stays put as the quota is spent is no bucket",
			why: "the same spending against a reset that does not move is a window counting " +
				"down: nothing refills before the reset, so nothing is spread",
			events: []event{
				obs(0, 0, Report{Limit: 1200, Remaining: 1000, Reset: reset(10 * time.Second)}, Seen{Horizon: time.Second}),
				obs(50*time.Millisecond, 3, Report{Limit: 1200, Remaining: 997, Reset: reset(10 * time.Second)}, Seen{Admitted: 3, Horizon: time.Second}),
				obs(100*time.Millisecond, 3, Report{Limit: 1200, Remaining: 994, Reset: reset(10 * time.Second)}, Seen{Admitted: 6, Horizon: time.Second}),
				obs(150*time.Millisecond, 3, Report{Limit: 1200, Remaining: 991, Reset: reset(10 * time.Second)}, Seen{Admitted: 9, Horizon: time.Second}),
				obs(200*time.Millisecond, 3, Report{Limit: 1200, Remaining: 988, Reset: reset(10 * time.Second)}, Seen{Admitted: 12, Horizon: time.Second}),
				obs(250*time.Millisecond, 3, Report{Limit: 1200, Remaining: 985, Reset: reset(10 * time.Second)}, Seen{Admitted: 15, Horizon: time.Second}),
				obs(300*time.Millisecond, 3, Report{Limit: 1200, Remaining: 982, Reset: reset(10 * time.Second)}, Seen{Admitted: 18, Horizon: time.Second}),
				obs(350*time.Millisecond, 3, Report{Limit: 1200, Remaining: 979, Reset: reset(10 * time.Second)}, Seen{Admitted: 21, Horizon: time.Second}),
			},
			want: observed{units: 979, known: true, reset: reset(10 * time.Second), rate: inf},
		},
		{
			name: "others' spending is measured as a negative drift",
			why: "600 left, 50 of ours admitted, 520 left 10 s later: others took 30, 3 a second; " +
				"what they will take until the reset (3 × 50 s) is left to them and the rest " +
				"spread, so their requests do not empty the window under ours",
			events: []event{
				obs(0, 0, Report{Limit: 600, Remaining: 600, Reset: minute, Window: time.Minute}, Seen{}),
				obs(10*time.Second, 50, Report{Limit: 600, Remaining: 520, Reset: minute, Window: time.Minute}, Seen{Admitted: 50}),
			},
			want: observed{units: 520, known: true, reset: minute, length: time.Minute, shared: true, drift: -3, rate: 0.9 * (520 - 150) / 50},
		},
		{
			name: "others' measured spending is bounded by maxDrain",
			why: "others cannot spend more than the quota's long-run rate leaves us, " +
				"(600 − 50) / 60 s; a bigger gap (450 in 10 s) is an error of the baseline, and " +
				"taken as a rate it would be extrapolated to the reset; and at most nine tenths " +
				"of what is left is kept for them (90 of 100), so each client keeps a floor; " +
				"its 10 are spent a look at least every reprobe (3 s), not 0.18 a second: " +
				"others' spending is only seen through responses",
			events: []event{
				obs(0, 0, Report{Limit: 600, Remaining: 600, Reset: minute, Window: time.Minute}, Seen{}),
				obs(10*time.Second, 50, Report{Limit: 600, Remaining: 100, Reset: minute, Window: time.Minute}, Seen{Admitted: 50}),
			},
			want: observed{units: 100, known: true, reset: minute, length: time.Minute, shared: true, drift: -550.0 / 60, rate: 1.0 / 3},
		},
		{
			name: "a fall within our requests in flight is not others' spending",
			why: "the 20 unseen requests were subtracted, but the server may have counted some " +
				"(here 10): a gap within that noise is no evidence of anyone, or the rise of " +
				"the in-flight count would read as others draining the quota",
			events: []event{
				obs(0, 0, Report{Limit: 600, Remaining: 600, Reset: minute, Window: time.Minute}, Seen{}),
				obs(10*time.Second, 50, Report{Limit: 600, Remaining: 560, Reset: minute, Window: time.Minute}, Seen{Unseen: 20, Admitted: 50}),
			},
			want: observed{units: 540, known: true, reset: minute, length: time.Minute, rate: inf},
		},
		{
			name: "others' spending of a token quota is measured beyond the estimates' error",
			why: "token costs are estimates: 30% of the 1000 charged may be their error, not " +
				"anyone's spending, so of a 1000 shortfall 700 are others' (70 a second), and " +
				"the quota is then spread, what they take to the reset kept for them",
			w: tokenQuota,
			events: []event{
				obs(0, 0, Report{Limit: 10000, Remaining: 10000, Reset: minute, Window: time.Minute}, Seen{}),
				obs(10*time.Second, 1000, Report{Limit: 10000, Remaining: 8000, Reset: minute, Window: time.Minute}, Seen{Admitted: 1000}),
			},
			// keeps the reserve (1000) and 70 × 50 s: 0.9 × 3500 over 50 s.
			want: observed{units: 8000, known: true, reset: minute, length: time.Minute, shared: true, drift: -70, rate: 0.9 * 3500 / 50},
		},
		{
			name: "a figure below the budget with no fed slack marks the quota shared",
			why: "the budget counts every request of ours, sent or not: 70 left of a budget of " +
				"80 that nothing of ours took is others' spending",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{}),
				obs(100*time.Millisecond, 0, Report{Limit: L, Remaining: 70, Reset: minute}, Seen{}),
			},
			want: observed{units: 70, known: true, reset: minute, shared: true, rate: 0.9 * 70 / 59.9},
		},
		{
			name: "requests feeding limiters have in flight excuse as much of a fall",
			why: "the budget does not count what feeding limiters admitted: 10 of theirs in " +
				"flight may account for 80 becoming 70",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{}),
				obs(100*time.Millisecond, 0, Report{Limit: L, Remaining: 70, Reset: minute}, Seen{Fed: 10}),
			},
			want: observed{units: 70, known: true, reset: minute, rate: inf},
		},
		{
			name: "fed slack suppresses 'someone else spent it'",
			why: "with limiters feeding the quota (Fed +Inf), requests charged elsewhere land in " +
				"it at any time: less left than the budget proves nothing about others",
			events: []event{
				obs(0, 0, Report{Limit: L, Remaining: 80, Reset: minute}, Seen{}),
				obs(100*time.Millisecond, 0, Report{Limit: L, Remaining: 70, Reset: minute}, Seen{Fed: inf}),
			},
			want: observed{units: 70, known: true, reset: minute, rate: inf},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := requests()
			if c.w != nil {
				w = c.w()
			}
			replay(t, w, c.events)
			got := observed{
				units: w.Units(), known: w.known, rolled: w.rolled, probing: w.look.out,
				reset: w.win.reset, length: w.win.length, kind: w.kind, shared: w.shared(), drift: w.drift.rate,
			}
			assert.InDelta(t, c.want.drift, got.drift, 1e-9, "drift; why: %s", c.why)
			got.drift = c.want.drift
			st, _ := w.Advance(last(c.events), 0, 1)
			rateEqual(t, c.want.rate, st.Rate, "rate; why: "+c.why)
			got.rate = c.want.rate
			assert.Equal(t, c.want, got, "why: %s", c.why)
		})
	}
}

// A reset that moved later with Remaining above the budget by no more than
// the requests in flight: the budget subtracted them, the server may have
// counted none, so the "jump" is no new window (Fixed); the quota,
// with no jump to show, is read as one that refills as it goes.
func TestAJumpNoLargerThanTheRequestsInFlightIsNoNewWindow(t *testing.T) {
	w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
	w.Observe(Report{Limit: 60, Remaining: 59, Reset: reset(time.Second)}, t0, Seen{Horizon: horizon})
	for range 4 {
		require.True(t, w.charge(w.amount(1), t0, 0, 0))
	}
	now := t0.Add(50 * time.Millisecond)
	w.Observe(Report{Limit: 60, Remaining: 58, Reset: now.Add(1950 * time.Millisecond)}, now, Seen{Unseen: 3, Admitted: 4, Horizon: horizon})
	assert.Equal(t, ToFull, w.kind, "58 against a budget of 55 with 3 in flight is no jump")

	// A jump beyond them is one: a window of 60 that started afresh.
	w = New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
	w.Observe(Report{Limit: 60, Remaining: 20, Reset: reset(time.Second)}, t0, Seen{Horizon: horizon})
	for range 4 {
		require.True(t, w.charge(w.amount(1), t0, 0, 0))
	}
	now = t0.Add(1100 * time.Millisecond)
	w.Observe(Report{Limit: 60, Remaining: 59, Reset: now.Add(time.Minute)}, now, Seen{Unseen: 3, Admitted: 4, Horizon: horizon})
	assert.Equal(t, Fixed, w.kind, "59 against a budget of 16 with 3 in flight is a new window")
}

// A bucket of a second states its time to full rounded up to a second on
// every answer, so its reset is always a second ahead and moves on with
// every answer by less than resets wander. Spent at its refill, its
// Remaining stays put, so the moves are not in step with the spending
// (R20). Answered densely, its answers
// went on past the reset the first stated: it refills as it goes (R19),
// and a higher Remaining from a request admitted after the budget was set
// raises the budget (R12), where a window that counts down would have read
// it as overtaken (R11) and held the budget at the lowest figure until
// nothing was sent for a second. A fixed window answered as densely to
// its end, its reset wandering by rounding, is not so read.
func TestAResetThatOutrunsItselfRefills(t *testing.T) {
	const step = 20 * time.Millisecond
	run := func(resetAt func(now time.Time) time.Time, remaining func(i int) float64) *State {
		w := New(Config{Name: "requests", Safety: 0.9, MaxDelay: time.Hour})
		for i := range 100 { // 2 s
			now := t0.Add(time.Duration(i) * step)
			w.Observe(Report{Limit: 300, Window: time.Second, Remaining: remaining(i), Reset: resetAt(now)},
				now, Seen{Seq: int64(i + 1), Admissions: int64(i + 1), Admitted: float64(i + 1), Horizon: horizon})
		}
		return w
	}
	bucket := run(func(now time.Time) time.Time { return now.Add(time.Second) },
		func(i int) float64 { return float64(min(290, 50+10*(i%3)+max(0, 10*(i-70)))) })
	assert.True(t, bucket.kind.refills(), "kind %v: its reset outran the first one stated", bucket.kind)
	assert.InDelta(t, 290.0, bucket.Units(), 1, "the last answer's Remaining, from the last request admitted")

	end := t0.Add(2*time.Second + 5*time.Millisecond)
	fixed := run(func(now time.Time) time.Time { return end.Add(time.Duration(now.Nanosecond()%3) * time.Millisecond) },
		func(i int) float64 { return float64(299 - i) })
	assert.False(t, fixed.kind.refills(), "kind %v: a fixed window's reset wanders, it does not outrun itself", fixed.kind)
}
