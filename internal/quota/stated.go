package quota

import "time"

// Stated is a quota the client states before any response does ("5,000
// requests an hour"): Limit requests per Window, the first window starting
// at Start (R51). Each report says what a server counting this client's
// requests in such windows would say, until the server states its own. A
// server whose windows start elsewhere can count up to twice Limit in one
// of its windows: its headers, when it sends them, take over.
type Stated struct {
	Limit  float64
	Window time.Duration
	start  time.Time // the current window's start
	used   float64   // the requests answered in it that the server counted
}

// Start begins the count at now, the first window's start, and reports the
// whole of Limit left.
func (s *Stated) Start(now time.Time) Report {
	s.start, s.used = now, 0
	return s.report()
}

// Answered counts a response that arrived at now, to a request the server
// counted (counted false: a refusal, which it did not), and reports the
// window it arrived in.
func (s *Stated) Answered(now time.Time, counted bool) Report {
	if end := s.start.Add(s.Window); !now.Before(end) {
		s.start = s.start.Add(now.Sub(s.start) / s.Window * s.Window)
		s.used = 0
	}
	if counted {
		s.used++
	}
	return s.report()
}

func (s *Stated) report() Report {
	return Report{Limit: s.Limit, Remaining: max(s.Limit-s.used, 0), Reset: s.start.Add(s.Window), Window: s.Window}
}
