package pacer

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pacer-go/pacer/store"
)

// scriptedBudgeter answers Lease calls with the leases a test scripts, in
// order, and records the requests.
type scriptedBudgeter struct {
	store.Store
	answers []store.Lease
	calls   []store.LeaseRequest
}

func (b *scriptedBudgeter) Lease(_ context.Context, _ string, r store.LeaseRequest) (store.Lease, error) {
	b.calls = append(b.calls, r)
	if len(b.answers) == 0 {
		return store.Lease{}, nil
	}
	l := b.answers[0]
	b.answers = b.answers[1:]
	return l, nil
}

func newScriptedFleet(answers ...store.Lease) (*fleetShare, *scriptedBudgeter) {
	b := &scriptedBudgeter{Store: store.NewMemory(), answers: answers}
	return newFleetShare(AdaptiveConfig{Key: "k", Store: b}, new(sync.Mutex)), b
}

func oneRequest() []need { return []need{{quota: "requests", amount: 1}} }

// The figures of a member's first responses, sent before it knew any quota,
// are reported with its first call, and its requests still out then are
// held: the fleet's budget must not count them as left.
func TestFleetMemberReportsItsFirstContact(t *testing.T) {
	f, b := newScriptedFleet(store.Lease{Known: true, Granted: 1, Budget: 20, ResetIn: time.Second, Members: 1})
	now := time.Now()
	ctx := context.Background()
	for range 2 {
		ok, _, err := f.take(ctx, nil, now, -1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	f.answered(nil, meaningOf(reply(http.StatusOK, requestsLeft(100, 30, time.Second)), now), now)

	ok, _, err := f.take(ctx, oneRequest(), now, -1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, b.calls, 1)
	r := b.calls[0]
	require.NotNil(t, r.Seen, "the first response's figure")
	assert.Equal(t, 30.0, r.Seen.Remaining)
	assert.Equal(t, 1.0, r.Seen.Held, "the other first request was out when it arrived")
	assert.Equal(t, 1.0, r.Held, "and is still out")
}

// A figure whose window has ended by the member's next call is not
// reported: it says nothing of the window now open.
func TestFleetMemberDropsAFigureOfAWindowThatEnded(t *testing.T) {
	for _, late := range []time.Duration{time.Second, 2 * time.Second} {
		f, b := newScriptedFleet(store.Lease{Known: false})
		now := time.Now()
		f.quota("requests") // a quota the member leases from
		f.answered(nil, meaningOf(reply(http.StatusOK, requestsLeft(100, 0, time.Second)), now), now)
		_, _, err := f.take(context.Background(), oneRequest(), now.Add(late), -1)
		require.NoError(t, err)
		require.Len(t, b.calls, 1)
		assert.Nil(t, b.calls[0].Seen, "a figure read %v before its reset, reported at %v", time.Second, late)
	}
}

// Units a request took by the member's own model (the store knew no
// budget) are held by the store for the member, and, given back unsent, do
// not become a lease the member spends without asking.
func TestFleetOwnModelUnitsGivenBackAreNoLease(t *testing.T) {
	f, b := newScriptedFleet(
		store.Lease{Known: true, Granted: 1, ResetIn: time.Second, Members: 1},
		store.Lease{Known: false, Members: 1},
		store.Lease{Known: true, Granted: 0, ResetIn: 900 * time.Millisecond, Members: 1},
	)
	now := time.Now()
	ctx := context.Background()
	first := oneRequest()
	ok, _, err := f.take(ctx, first, now, -1)
	require.NoError(t, err)
	require.True(t, ok, "leased")
	f.answered(first, nil, now)

	own := oneRequest()
	ok, _, err = f.take(ctx, own, now, -1)
	require.NoError(t, err)
	require.True(t, ok, "by its own model")
	assert.Equal(t, 1.0, b.calls[1].Unbudgeted, "the store holds it for the member meanwhile")
	f.giveBack(own) // its own model refused it after all

	ok, _, err = f.take(ctx, oneRequest(), now, -1)
	require.NoError(t, err)
	assert.False(t, ok, "the store has nothing left to lease")
	assert.Len(t, b.calls, 3, "the member asked the store")
}
