package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunSucceeds runs the example end to end over loopback, as
// "go run ./examples/metrics" does.
func TestRunSucceeds(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out), out.String())
	assert.Contains(t, out.String(), "pacer_attempts = ")
	t.Log(out.String())
}
