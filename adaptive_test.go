package pacer

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNewAdaptivePanicsOnInvalidConfigNamingTheField(t *testing.T) {
	cases := []struct {
		name string
		cfg  AdaptiveConfig
		want string
	}{
		{"safety above one", AdaptiveConfig{SafetyFactor: 1.5}, "pacer: AdaptiveConfig.SafetyFactor must be in (0,1], got 1.5"},
		{"negative safety", AdaptiveConfig{SafetyFactor: -0.1}, "pacer: AdaptiveConfig.SafetyFactor must be in (0,1], got -0.1"},
		{"NaN safety", AdaptiveConfig{SafetyFactor: math.NaN()}, "pacer: AdaptiveConfig.SafetyFactor must be in (0,1], got NaN"},
		{"negative min limit", AdaptiveConfig{MinLimit: -1}, "pacer: AdaptiveConfig.MinLimit must be a positive finite rate, got -1"},
		{"NaN min limit", AdaptiveConfig{MinLimit: Limit(math.NaN())}, "pacer: AdaptiveConfig.MinLimit must be a positive finite rate, got NaN"},
		{"infinite min limit", AdaptiveConfig{MinLimit: Inf}, "pacer: AdaptiveConfig.MinLimit must be a positive finite rate, got 1.7976931348623157e+308"},
		{"negative ceiling", AdaptiveConfig{Ceiling: -2}, "pacer: AdaptiveConfig.Ceiling must be ≥ 0, got -2"},
		{"NaN ceiling", AdaptiveConfig{Ceiling: Limit(math.NaN())}, "pacer: AdaptiveConfig.Ceiling must be ≥ 0, got NaN"},
		{"negative ceiling burst", AdaptiveConfig{CeilingBurst: -1}, "pacer: AdaptiveConfig.CeilingBurst must be ≥ 0, got -1"},
		{"negative max wait", AdaptiveConfig{MaxWait: -time.Second}, "pacer: AdaptiveConfig.MaxWait must be ≥ 0, got -1s"},
		{"negative max delay", AdaptiveConfig{MaxDelay: -time.Second}, "pacer: AdaptiveConfig.MaxDelay must be ≥ 0, got -1s"},
		{"negative slow start", AdaptiveConfig{SlowStart: -3}, "pacer: AdaptiveConfig.SlowStart must be ≥ 0, got -3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tc.want, func() { NewAdaptive(tc.cfg) })
		})
	}
}
