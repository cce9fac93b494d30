package pacer

import (
	"net/http"
	"time"

	"github.com/pacer-go/pacer/internal/quota"
	"github.com/pacer-go/pacer/internal/response"
)

// Settling: a Permit's Done, which applies what the response said, and its
// Abandon, which gives the charge back.

// Permit is one request's admission by [Adaptive.Acquire]. The request
// counts as in flight, and its cost as charged, until the permit is settled
// by exactly one call of Done (the request was sent) or Abandon (it was
// not). Later calls on the same Permit do nothing; a Permit must not be
// copied before it is settled.
type Permit struct {
	a     *Adaptive
	cost  float64
	live  bool
	fleet []need // what the request took of the fleet's budgets
}

// Done settles the permit of a request that was sent, with the response it
// got: nil when none was obtained (the request stops counting as in flight,
// nothing is learned, and its cost stays charged, since the server may have
// counted it). The limiter learns at once what the response says about the
// rate limit: every header convention [ParseHeaders] reads, absolute resets
// corrected by the server's Date, and, for a 403 or 429, what its body
// states (a limit only the body names, such as GitHub's secondary limits; a
// quota gone for good, such as OpenAI's insufficient_quota). For that it
// reads at most 4 KiB of such a body, which stays readable byte for byte;
// resp is otherwise untouched, and the caller still closes its body.
func (p *Permit) Done(resp *http.Response) {
	if !p.live {
		return
	}
	now := time.Now()
	if resp == nil {
		p.doneWith(nil, now)
		return
	}
	var m response.Meaning
	response.Read(&m, resp, now, capsOf(p.a.cfg.MaxDelay), &p.a.clock)
	p.doneWith(&m, now)
}

// doneWith is Done for a response read as m, which arrived at now (the
// Transport's one reading of the clock and of the response); nil for none.
// The limiter copies what it keeps of m. (m goes by pointer, down to the
// limiter's learn: copying it at each call was 4% of a response's CPU time
// through the Transport.)
func (p *Permit) doneWith(m *response.Meaning, now time.Time) {
	if !p.live {
		return
	}
	p.live = false
	p.a.fleet.answered(p.fleet, m, now)
	p.a.learn(m, true, p.cost, now)
}

// Abandon settles the permit of a request that was not sent: its charge is
// given back to every quota and it stops counting as in flight.
func (p *Permit) Abandon() {
	if !p.live {
		return
	}
	p.live = false
	p.a.fleet.giveBack(p.fleet)
	p.a.abandon(p.cost)
}

// abandon undoes an admission whose request was never sent.
func (a *Adaptive) abandon(cost float64) {
	a.mu.Lock()
	a.refund(cost)
	a.settle(cost)
	a.admitted.Add(-1)
	if m := quota.ToMilli(cost); m > 0 {
		a.admittedCost.Add(-m)
		a.hintedAdmits.Add(-1)
	}
	a.changedLocked()
	a.wakeGateLocked()
	a.unlock()
}
