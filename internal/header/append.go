package header

// Append adds a zero quota to qs and returns it for the caller to fill: for
// a reader of quotas stated elsewhere than in the fields Parse reads (a
// refusal's body, package response), so that they reach the limiter as
// the headers' do. It returns nil when qs holds as many as one response
// keeps (16). The caller upholds Quota's invariants (Remaining -1 when
// unknown, never above a known Limit; a Reset within the caps).
func (qs *Quotas) Append() *Quota {
	if qs.n == maxQuotas {
		return nil
	}
	var q *Quota
	if qs.n < len(qs.room) {
		q = &qs.room[qs.n]
	} else {
		qs.more = append(qs.more, Quota{})
		q = &qs.more[len(qs.more)-1]
	}
	qs.n++
	*q = Quota{}
	return q
}
