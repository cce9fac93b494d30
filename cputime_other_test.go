//go:build !unix

package pacer

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
