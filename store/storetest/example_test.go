package storetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pacer-go/pacer/store"
	"github.com/pacer-go/pacer/store/storetest"
)

// newPeers makes a clean backend and returns a way to open handles on it.
// For an in-process store every handle is the same value; a store on a
// server starts a server (or picks a fresh key prefix) here, returns a new
// client on it from each call of Peers, and closes both with t.Cleanup.
//
// A store's whole conformance test is then, in a _test.go file of its
// package, run under -race:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, newPeers)
//	}
func newPeers(t *testing.T) storetest.Peers {
	s := store.NewMemory()
	return func() store.Store { return s }
}

// Handles from one Peers share every key, as processes sharing a server do:
// here the second handle waits for the token the first one took.
func ExampleRun() {
	peers := newPeers(nil) // Run passes each case's t
	a, b := peers(), peers()
	r := store.Request{Tokens: 1, Limit: 1, Burst: 1}
	ga, _ := a.Reserve(context.Background(), "api.example.com", r)
	gb, _ := b.Reserve(context.Background(), "api.example.com", r)
	fmt.Println(ga.Delay.Round(time.Second), gb.Delay.Round(time.Second))
	// Output: 0s 1s
}
