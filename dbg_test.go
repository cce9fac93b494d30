package pacer

import (
	"testing"
	"time"
)

func TestDbg(t *testing.T) {
	for _, w := range []time.Duration{time.Minute, 10 * time.Second} {
		for _, sc := range scenarios(w, map[time.Duration]int{time.Minute: 600, 10 * time.Second: 50}[w]) {
			for _, lat := range []time.Duration{0, 20 * time.Millisecond, 200 * time.Millisecond} {
				sc.server.Latency = lat
				o := drive(t, sc, AdaptiveConfig{Key: "sim", SafetyFactor: 0.9})
				t.Logf("%-28s %v %5v: %v", sc.name, w, lat, o)
			}
		}
	}
}
