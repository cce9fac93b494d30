package work

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/pacer-go/pacer/internal/mark"
)

func TestClassOfUnmarkedWorkIsInteractive(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, Interactive, ClassOf(ctx))
	assert.Equal(t, Batch, ClassOf(WithClass(ctx, Batch)))
	assert.Equal(t, Interactive, ClassOf(WithClass(WithClass(ctx, Batch), Interactive)), "the innermost mark wins")
	assert.Equal(t, "batch", Batch.String())
	assert.Equal(t, "Class(7)", Class(7).String())
	assert.PanicsWithValue(t, "work: WithClass(7): not a Class", func() { WithClass(ctx, Class(7)) })
}

func TestWithCostCarriesANonNegativeCost(t *testing.T) {
	ctx := context.Background()
	assert.Zero(t, mark.Of(ctx).Cost)
	assert.Equal(t, 1500.0, mark.Of(WithCost(ctx, 1500)).Cost)
	assert.Zero(t, mark.Of(WithCost(ctx, -3)).Cost)
	assert.Zero(t, mark.Of(WithCost(ctx, math.NaN())).Cost)
	assert.Equal(t, 1500.0, mark.Of(WithClass(WithCost(ctx, 1500), Batch)).Cost, "a class keeps the cost")
	assert.Equal(t, Batch, ClassOf(WithCost(WithClass(ctx, Batch), 1500)), "a cost keeps the class")
}
