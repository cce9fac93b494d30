package observe

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBoundReasonNames(t *testing.T) {
	for r, want := range []string{"unmoved", "headroom", "latency", "overload", "quota", "rate", "probe"} {
		assert.Equal(t, want, BoundReason(r).String())
	}
	assert.Equal(t, "BoundReason(7)", BoundReason(7).String())
	assert.Equal(t, "headers", ModeHeaders.String())
}
