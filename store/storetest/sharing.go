package storetest

import (
	"testing"
	"time"

	"github.com/pacer-go/pacer/store"
)

// The cases of this file check Publish and what StoreGrant.Shared reports:
// learned limits and pauses, shared between handles on one backend.

func testPause(t *testing.T, peers Peers, _ config) {
	a, b := peers(), peers()
	publish(t, a, "k", store.State{Pause: 2 * time.Second})
	g := reserve(t, a, "k", req(1, 10, 1))
	checkGrant(t, "a token during a 2 s pause", g, true, 2*time.Second)
	checkNear(t, "the pause a reports", 2*time.Second, g.Shared.Pause)

	flush(t, a)
	checkGrant(t, "b's token comes after a's, at 10/s", reserve(t, b, "k", req(1, 10, 1)), true, 2100*time.Millisecond)
	checkGrant(t, "b at Unlimited waits for the pause only", reserve(t, b, "k", req(1, store.Unlimited, 1)), true, 2*time.Second)
}

func testPauseExtends(t *testing.T, peers Peers, _ config) {
	s := peers()
	publish(t, s, "k", store.State{Pause: 2 * time.Second})
	publish(t, s, "k", store.State{Pause: time.Second})
	flush(t, s)
	checkGrant(t, "a shorter pause does not shorten the 2 s one", reserve(t, s, "k", req(1, store.Unlimited, 1)), true, 2*time.Second)
	publish(t, s, "k", store.State{Pause: 3 * time.Second})
	flush(t, s)
	checkGrant(t, "a longer one extends it", reserve(t, s, "k", req(1, store.Unlimited, 1)), true, 3*time.Second)
}

func testPauseMaxWait(t *testing.T, peers Peers, _ config) {
	s := peers()
	publish(t, s, "k", store.State{Pause: 2 * time.Second})
	flush(t, s)
	for _, limit := range []float64{1, store.Unlimited} {
		r := req(1, limit, 1)
		r.MaxWait = time.Second
		checkGrant(t, "MaxWait 1 s in a 2 s pause at limit "+ftoa(float64(limit)), reserve(t, s, "k", r), false, 2*time.Second)
	}
	checkGrant(t, "another key is not paused", reserve(t, s, "other", req(1, 1, 1)), true, 0)
}

func testLearnedShared(t *testing.T, peers Peers, _ config) {
	a, b := peers(), peers()
	if sh := reserve(t, b, "k", req(1, store.Unlimited, 1)).Shared; sh.Limit != 0 {
		t.Errorf("nothing learned yet, but Shared is %+v", sh)
	}

	publish(t, a, "k", store.State{Limit: 4.5, Burst: 3})
	flush(t, a)
	sh := reserve(t, b, "k", req(1, 2, 1)).Shared
	if sh.Limit != 4.5 || sh.Burst != 3 {
		t.Errorf("b sees %+v, want the limit 4.5 and burst 3 a published", sh)
	}
	if sh.Age < 0 || sh.Age > Tolerance {
		t.Errorf("b sees an age of %v for a limit published just now", sh.Age)
	}

	publish(t, b, "k", store.State{Limit: 0.25, Burst: 1})
	flush(t, b)
	if sh := reserve(t, a, "k", req(1, store.Unlimited, 1)).Shared; sh.Limit != 0.25 || sh.Burst != 1 {
		t.Errorf("a sees %+v, want the newest learned limit 0.25, burst 1", sh)
	}

	publish(t, a, "k", store.State{Pause: time.Millisecond})
	flush(t, a)
	if sh := reserve(t, b, "k", req(1, store.Unlimited, 1)).Shared; sh.Limit != 0.25 {
		t.Errorf("a pause alone changed the learned limit: %+v", sh)
	}
	if sh := reserve(t, b, "other", req(1, store.Unlimited, 1)).Shared; sh.Limit != 0 {
		t.Errorf("another key sees a learned limit: %+v", sh)
	}
}

// testPublishVisibleAtOnce checks the publisher's own view without Flush:
// limiters publish on the request path and read back at once.
func testPublishVisibleAtOnce(t *testing.T, peers Peers, _ config) {
	s := peers()
	publish(t, s, "k", store.State{Limit: 7, Burst: 2})
	if sh := reserve(t, s, "k", req(1, store.Unlimited, 1)).Shared; sh.Limit != 7 || sh.Burst != 2 {
		t.Errorf("the publisher sees %+v right after publishing the limit 7, burst 2", sh)
	}
	publish(t, s, "k", store.State{Pause: time.Second})
	g := reserve(t, s, "k", req(1, store.Unlimited, 1))
	checkGrant(t, "the publisher's reservation right after a 1 s pause", g, true, time.Second)
	checkNear(t, "the pause the publisher sees", time.Second, g.Shared.Pause)
}

func testAge(t *testing.T, peers Peers, _ config) {
	a, b := peers(), peers()
	published := time.Now()
	publish(t, a, "k", store.State{Limit: 2, Burst: 1, Age: time.Hour}) // Age is ignored
	flush(t, a)
	flushed := time.Now()
	if sh := reserve(t, b, "k", req(1, store.Unlimited, 1)).Shared; sh.Age > time.Since(published)+Tolerance {
		t.Errorf("a limit published with Age 1h reads as %v old: Publish must ignore Age", sh.Age)
	}

	time.Sleep(500 * time.Millisecond)
	before := time.Now()
	sh := reserve(t, b, "k", req(1, store.Unlimited, 1)).Shared
	after := time.Now()
	// The store's clock is not ours, but its durations match ours: the age
	// lies between what passed since the publish surely happened and what
	// passed since it began.
	if lo, hi := before.Sub(flushed)-Tolerance, after.Sub(published)+Tolerance; sh.Age < lo || sh.Age > hi {
		t.Errorf("age %v half a second after publishing, want within [%v, %v]", sh.Age, lo, hi)
	}
}
