package quota

import "time"

// Charge takes a request of cost (≤ 0: a blind request) from every known
// quota at now (R1-R7), leaving share of each quota's limit (a class's
// reserve) and room for the stated costs in flight besides it (flight, in
// tokens) to fall short. If one cannot take it, nothing stays charged and
// its name is returned.
func (b *Book) Charge(cost float64, now time.Time, share, flight float64) (short string, ok bool) {
	for i, s := range b.charged {
		amount := s.amount(cost)
		if amount == 0 || s.charge(amount, now, share, s.unconfirmed(cost, flight)) {
			s.countBlind(cost, amount)
			continue
		}
		for _, u := range b.charged[:i] {
			u.refund(cost)
		}
		return s.cfg.Name, false
	}
	return "", true
}

// Refund gives a charge back to every known quota (its request was not
// sent). A blind request gets back what such requests are charged now.
func (b *Book) Refund(cost float64) {
	for _, s := range b.charged {
		s.refund(cost)
	}
}

// Refused says when a request of cost the named quota refused at its last
// Charge may try again, asked at now once the owner advanced the book
// (zero: at once), and whether only a class's reserve holds it (R7). A spent
// quota with a look out waits for it, or with nothingOut looks again (R26).
func (b *Book) Refused(short string, cost float64, now time.Time, share, flight float64, nothingOut bool) (at time.Time, reserved bool) {
	s := b.find(short)
	if s == nil {
		return time.Time{}, false
	}
	amount := s.amount(cost)
	spent := s.budget.have < amount+s.debt(now)
	switch {
	case spent && !s.look.out:
		return later(now, s.look.wake), false
	case spent && nothingOut:
		s.startLook(float64(amount) / Milli)
		return time.Time{}, false
	case spent:
		return now, false // the look's answer will tell
	case s.reserved(amount, now, share):
		return s.refillAt(now), true
	case s.unconfirmed(cost, flight) > 0:
		return now, false // the answers in flight say what they took (R5)
	}
	return time.Time{}, false
}

// SpentUntil is when the budgets could take a request of cost: the wake-up
// of a quota that is spent now, else the zero time. With share > 0, a quota
// that holds the request only in its reserve is spent until it refills (R7).
func (b *Book) SpentUntil(cost, share float64, now time.Time) time.Time {
	var at time.Time
	for _, s := range b.charged {
		amount := s.amount(cost)
		switch {
		case amount == 0:
		case s.budget.have < amount:
			at = later(at, s.look.wake)
		case share > 0 && s.reserved(amount, now, share):
			at = later(at, s.refillAt(now))
		}
	}
	return at
}

// amount is what a request of cost takes from the quota, in milli-units
// (R3, R50); 0 for a blind request while nothing is learnt.
func (s *State) amount(cost float64) int64 {
	switch {
	case !s.cfg.Tokens:
		return Milli
	case cost > 0:
		return min(milli(cost), s.size.most)
	}
	return s.blindAmount()
}

// charge takes amount if what is left still covers the debt at now, the
// reserve share leaves and margin (R1, R5, R7).
func (s *State) charge(amount int64, now time.Time, share float64, margin int64) bool {
	if s.budget.have-amount < s.debt(now)+s.held(share)+margin {
		return false
	}
	s.budget.have -= amount
	return true
}

func (s *State) refund(cost float64) {
	amount := s.amount(cost)
	s.budget.have += amount
	s.countBlind(cost, -amount)
}

// unconfirmed is what a charge must leave of a token quota beyond its
// reserve for the stated costs no figure has confirmed yet, its own and
// flight, to fall short (R5); nothing for a look.
func (s *State) unconfirmed(cost, flight float64) int64 {
	if !s.cfg.Tokens || s.look.out || flight <= 0 {
		return 0
	}
	own := 0.0
	if cost > 0 {
		own = float64(s.amount(cost)) / Milli
	}
	return max(milli(estimateError*(own+flight))-milli(s.reserve()), 0)
}

// held is what a charge leaving share of the limit keeps, milli-units (R7).
func (s *State) held(share float64) int64 {
	if !(share > 0) || s.look.out || s.rolled {
		return 0
	}
	return milli(share * s.Limit())
}

// reserved reports whether only the reserve held for share refuses amount.
func (s *State) reserved(amount int64, now time.Time, share float64) bool {
	d := s.debt(now)
	return s.budget.have-amount >= d && s.budget.have-amount < d+s.held(share)
}

// refillAt is when a quota whose reserve holds back a request next gains
// budget: a window's roll if it does not refill, else a look after reprobe.
func (s *State) refillAt(now time.Time) time.Time {
	if !s.win.reset.IsZero() && !s.kind.refills() {
		return s.win.reset.Add(RollGuard)
	}
	return now.Add(s.reprobe())
}
