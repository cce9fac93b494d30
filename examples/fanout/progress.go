package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// sample is the state the progress display reads.
type sample struct {
	done      int    // requests finished, whatever their outcome
	throttled int    // 429s the server sent so far
	limit     string // what the limiter is doing, e.g. "limit 18.0/s (headers)"
}

// progress shows a run's progress: on a terminal, a bar redrawn in place ten
// times a second; elsewhere (a pipe, a CI log), one plain line per second.
type progress struct {
	out    io.Writer
	tty    bool
	total  int
	sample func() sample

	history []point // recent samples, for the current rate
}

type point struct {
	at   time.Duration
	done int
}

// rateSpan is how far back the displayed rate looks: long enough to smooth
// the bursts of a window reset, short enough to show pacing changes.
const rateSpan = 2 * time.Second

// start draws until the returned stop is called; stop draws the final state
// and returns once nothing more will be written.
func (p *progress) start(t0 time.Time) (stop func()) {
	every := time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				p.draw(time.Since(t0), false)
			case <-quit:
				if p.tty {
					p.draw(time.Since(t0), true)
				}
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			wg.Wait()
		})
	}
}

func (p *progress) draw(elapsed time.Duration, final bool) {
	s := p.sample()
	rate := p.rate(elapsed, s.done)
	if !p.tty {
		fmt.Fprintf(p.out, "%6.1fs  %*d/%d done  %5.1f req/s  server 429s: %d  %s\n",
			elapsed.Seconds(), digits(p.total), s.done, p.total, rate, s.throttled, s.limit)
		return
	}
	// \r returns to the start of the line, \x1b[K erases what a longer
	// previous line left behind.
	// Under 80 columns, so that the line never wraps (a wrapped line cannot
	// be redrawn with \r).
	fmt.Fprintf(p.out, "\r%s %*d/%d  %5.1f req/s  429s %d  %s  %.1fs\x1b[K",
		bar(s.done, p.total, 16), digits(p.total), s.done, p.total, rate, s.throttled, s.limit, elapsed.Seconds())
	if final {
		fmt.Fprintln(p.out)
	}
}

// rate is the requests finished per second over the last rateSpan.
func (p *progress) rate(now time.Duration, done int) float64 {
	p.history = append(p.history, point{now, done})
	for len(p.history) > 2 && now-p.history[1].at >= rateSpan {
		p.history = p.history[1:]
	}
	first := p.history[0]
	if now <= first.at {
		if now > 0 {
			return float64(done) / now.Seconds()
		}
		return 0
	}
	return float64(done-first.done) / (now - first.at).Seconds()
}

// bar renders done/total as [=====>    ] of the given inner width.
func bar(done, total, width int) string {
	filled := 0
	if total > 0 {
		filled = min(width, done*width/total)
	}
	head := ""
	if filled < width {
		head = ">"
		if filled == 0 {
			head = " "
		}
	}
	return "[" + strings.Repeat("=", filled) + head + strings.Repeat(" ", max(0, width-filled-len(head))) + "]"
}

func digits(n int) int { return len(fmt.Sprint(n)) }
