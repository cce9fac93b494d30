// Package mark carries what a context says of the requests made with it:
// their class of work and their stated cost (package work's WithClass and
// WithCost), and the probe an adaptive Executor's call is told through
// when each attempt goes. It is one value under one key, so that a
// request's every mark is found with one lookup.
package mark

import "context"

// Marks is what a context says of its requests. The zero value is an
// unmarked context's: interactive work of no stated cost, no probe.
type Marks struct {
	Cost    float64 // the stated cost; 0 when none is stated
	Class   uint8   // the work.Class; 0 is work.Interactive
	Classed bool    // Class was set, not left at its default
	Probe   any     // an adaptive Executor's call's probe; nil when none
}

type key struct{}

// Of returns ctx's marks.
func Of(ctx context.Context) Marks {
	m, _ := ctx.Value(key{}).(Marks)
	return m
}

// With returns a copy of ctx whose marks are m.
func With(ctx context.Context, m Marks) context.Context {
	return context.WithValue(ctx, key{}, m)
}
