package pacer

// slots is the Executor's FIFO semaphore: a call takes one of limit slots,
// or queues and is granted one in order of arrival. The limit may change at
// any time (an adaptive bound): a rise grants queued calls at once; a fall
// takes no slot back, it only grants none until fewer than the new limit
// are held. A queued call is never lost: it is granted a slot, or removes
// itself when its context ends. Every method runs under the Executor's
// mutex, so admission, counting and the bound change under one lock.
type slots struct {
	limit, held int
	head, tail  *slotWaiter
}

// slotWaiter is a queued call (embedded in its execCall: no allocation but
// the channel). ready is closed when the slot is granted; granted and
// inUse are written under the lock before it closes.
type slotWaiter struct {
	ready      chan struct{}
	granted    bool
	inUse      int // slots held once this one was granted, itself included
	prev, next *slotWaiter
}

// tryTake takes a slot if one is free and nobody queues before the caller
// (FIFO: a newcomer never overtakes a queued call).
func (s *slots) tryTake() bool {
	if s.held < s.limit && s.head == nil {
		s.held++
		return true
	}
	return false
}

// enqueue queues w at the tail.
func (s *slots) enqueue(w *slotWaiter) {
	w.ready = make(chan struct{})
	w.prev, w.next = s.tail, nil
	if s.tail != nil {
		s.tail.next = w
	} else {
		s.head = w
	}
	s.tail = w
}

func (s *slots) unlink(w *slotWaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		s.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		s.tail = w.prev
	}
	w.prev, w.next = nil, nil
}

// grant hands free slots to queued calls, oldest first.
func (s *slots) grant() {
	for s.head != nil && s.held < s.limit {
		w := s.head
		s.unlink(w)
		s.held++
		w.granted, w.inUse = true, s.held
		close(w.ready)
	}
}

// release returns a slot and grants it on.
func (s *slots) release() {
	s.held--
	s.grant()
}

// setLimit changes the limit; slots held above a lower limit stay held
// until released.
func (s *slots) setLimit(n int) {
	s.limit = n
	s.grant()
}

// leave withdraws w, whose context ended while it queued. A slot granted to
// it meanwhile is released to the next in line.
func (s *slots) leave(w *slotWaiter) {
	if w.granted {
		s.release()
		return
	}
	s.unlink(w)
}
