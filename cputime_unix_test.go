//go:build unix

package pacer

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the process has used. A
// benchmark on a busy machine measures it rather than wall time: waiting for
// a core does not count.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
