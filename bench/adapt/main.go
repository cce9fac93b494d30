// Command adapt is the adaptation benchmark: pacer with zero configuration
// against the clients users pick instead, on the same simulated rate-limited
// APIs (internal/apisim, one per header style, served over loopback HTTP in
// real time) under the same closed-loop workload.
//
//	cd bench && go run ./adapt                                   # table on stdout
//	cd bench && go run ./adapt -md RESULTS.md -svg adapt.svg     # what RESULTS.md shows
//	cd bench && go run ./adapt -styles github,retry-after -clients pacer,aws-cubic -window 5s
//	cd bench && go run ./adapt -runs 5 -md RESULTS.md -svg adapt.svg  # pacer's median and (worst) of 5
//
// See RESULTS.md for the definitions of every column.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := benchmark(ctx, opts, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "adapt:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	scenario
	Windows  int // run length in windows
	Runs     int // runs of each of pacer's cells (the peers run once)
	Parallel int // runs at a time
	Styles   []apisim.Style
	Clients  []clientKind
	MD, SVG  string // output files; "" = none
	Command  string // how the run was invoked, for RESULTS.md
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("adapt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.Quota, "quota", 100, "requests per window the simulated APIs allow")
	fs.DurationVar(&o.Window, "window", 5*time.Second, "the APIs' quota window")
	fs.IntVar(&o.Windows, "windows", 3, "how many windows each run lasts")
	fs.IntVar(&o.Workers, "workers", 32, "concurrent workers per run, each looping requests")
	fs.IntVar(&o.Runs, "runs", 1, "runs of each of pacer's cells, each with a fresh server and client (the peers run once); the table shows the median and (the worst), and the acceptance criteria must hold in every run")
	fs.IntVar(&o.Parallel, "parallel", len(allClients()), "runs at a time, each with its own server and client (1: one after another)")
	algorithm := fs.String("algorithm", "", "how the APIs count: fixed-window, sliding-window or token-bucket (default: fixed-window, token-bucket for shopify)")
	fs.DurationVar(&o.Latency, "latency", 20*time.Millisecond, "the APIs' service time per request")
	styles := fs.String("styles", "default", "comma-separated header styles (apisim.Styles()), all, or default: every style but "+
		strings.Join(ownWindowNames(), ", ")+", whose resets are late or restated a window away as those APIs state theirs (SITUATIONS.md measures them at their own windows)")
	clients := fs.String("clients", "all", "comma-separated clients ("+joinKinds(allClients())+"), or all")
	fs.StringVar(&o.MD, "md", "", "write the report (table, acceptance, machine) to this markdown file")
	fs.StringVar(&o.SVG, "svg", "", "write the plot to this SVG file")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	fail := func(err error) (options, error) {
		fmt.Fprintln(stderr, "adapt:", err)
		return options{}, err
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	switch {
	case o.Quota <= 0:
		return fail(fmt.Errorf("-quota %d: must be > 0", o.Quota))
	case o.Window <= 0:
		return fail(fmt.Errorf("-window %v: must be > 0", o.Window))
	case o.Windows <= 0:
		return fail(fmt.Errorf("-windows %d: must be > 0", o.Windows))
	case o.Workers <= 0:
		return fail(fmt.Errorf("-workers %d: must be > 0", o.Workers))
	case o.Runs <= 0:
		return fail(fmt.Errorf("-runs %d: must be > 0", o.Runs))
	case o.Parallel <= 0:
		return fail(fmt.Errorf("-parallel %d: must be > 0", o.Parallel))
	case o.Latency < 0:
		return fail(fmt.Errorf("-latency %v: must be ≥ 0", o.Latency))
	}
	switch a := apisim.Algorithm(*algorithm); a {
	case "", apisim.FixedWindow, apisim.SlidingWindow, apisim.TokenBucket:
		o.Algorithm = a
	default:
		return fail(fmt.Errorf("-algorithm %q: want fixed-window, sliding-window or token-bucket", a))
	}
	o.Duration = time.Duration(o.Windows) * o.Window
	o.Bin = o.Window / 4

	var err error
	if *styles == "default" {
		o.Styles = defaultStyles()
	} else if o.Styles, err = pick(*styles, apisim.Styles()); err != nil {
		return fail(fmt.Errorf("-styles: %w", err))
	}
	if o.Clients, err = pick(*clients, allClients()); err != nil {
		return fail(fmt.Errorf("-clients: %w", err))
	}
	o.Command = strings.Join(append([]string{"go run ./adapt"}, args...), " ")
	return o, nil
}

// pick parses a comma-separated selection from all ("all" selects all), in
// the order of all.
func pick[T ~string](list string, all []T) ([]T, error) {
	if list == "all" {
		return all, nil
	}
	var out []T
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(all, T(name)) {
			return nil, fmt.Errorf("unknown %q", name)
		}
		if !slices.Contains(out, T(name)) {
			out = append(out, T(name))
		}
	}
	slices.SortFunc(out, func(a, b T) int { return slices.Index(all, a) - slices.Index(all, b) })
	return out, nil
}

// ownWindowStyles state resets as their APIs do, late (Reddit's delta
// seconds by up to a second and a half, Mastodon's instants by the
// request's fraction of a second) or restated a window from every answer
// (gitlab.com's Date + 60 s): on the benchmark's 5 s windows that is a
// fifth of a window or a whole one, a figure of the window's length
// rather than of the client, so they run only when named; TestSituations
// measures them at their own windows (10 minutes, 5 minutes, a minute).
var ownWindowStyles = []apisim.Style{apisim.StyleReddit, apisim.StyleMastodon, apisim.StyleGitLab}

func ownWindowNames() []string {
	out := make([]string, len(ownWindowStyles))
	for i, s := range ownWindowStyles {
		out[i] = string(s)
	}
	return out
}

// defaultStyles is every style but ownWindowStyles.
func defaultStyles() []apisim.Style {
	var out []apisim.Style
	for _, s := range apisim.Styles() {
		if !slices.Contains(ownWindowStyles, s) {
			out = append(out, s)
		}
	}
	return out
}

func joinKinds(ks []clientKind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// runKey identifies one cell of the table: a style × client, run once or,
// for pacer, Runs times.
type runKey struct {
	Style  apisim.Style
	Client clientKind
}

// runsOf is how many times the cells of the given client run: Runs for
// pacer, once for the peers (a real-time run costs the same for every
// client, and only pacer is held to anything).
func (o options) runsOf(kind clientKind) int {
	if kind == clientPacer {
		return max(1, o.Runs)
	}
	return 1
}

// job is one run: a cell and which of its runs.
type job struct {
	runKey
	Run int // from 0
}

// benchmark runs every selected style × client (pacer's Runs times),
// Parallel runs at a time in style-major order (with the defaults, the
// clients of one style run side by side, each against its own server),
// reporting each run as it ends on progress; then it writes the table to
// out and the files asked for.
func benchmark(ctx context.Context, o options, out, progress io.Writer) error {
	var jobs []job
	results := make(map[runKey][]outcome)
	for _, style := range o.Styles {
		for _, kind := range o.Clients {
			key := runKey{style, kind}
			results[key] = make([]outcome, o.runsOf(kind))
			for run := range o.runsOf(kind) {
				jobs = append(jobs, job{key, run})
			}
		}
	}
	batches := (len(jobs) + o.Parallel - 1) / o.Parallel
	each := ""
	if o.Runs > 1 {
		each = fmt.Sprintf(", pacer's %d times each", o.Runs)
	}
	fmt.Fprintf(progress, "adapt: %d runs of %v (quota %d per %v, %d workers%s), %d at a time: about %v\n",
		len(jobs), o.Duration, o.Quota, o.Window, o.Workers, each, o.Parallel, (time.Duration(batches) * o.Duration).Round(time.Second))

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		slots = make(chan struct{}, o.Parallel)
	)
	began, load := time.Now(), loadAverage()
	for _, job := range jobs {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			name := string(job.Client)
			if n := o.runsOf(job.Client); n > 1 {
				name = fmt.Sprintf("%s %d/%d", name, job.Run+1, n)
			}
			res, err := runOne(ctx, o.scenario, job.Style, job.Client)
			if err != nil {
				cancel(fmt.Errorf("%s × %s: %w", job.Style, name, err))
				return
			}
			mu.Lock()
			defer mu.Unlock()
			results[job.runKey][job.Run] = res
			fmt.Fprintf(progress, "  %-12s %-14s goodput %.2f  429s %5d (%d after 1st response)  errors %5d  p99 added %v\n",
				job.Style, name, res.Goodput(), res.Throttled, res.ThrottledAfterFirst, res.Failed, fmtDur(res.AddedP99))
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	elapsed := time.Since(began)

	r := report{options: o, results: results, elapsed: elapsed, loadBefore: load}
	if err := r.writeTable(out); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if err := r.writeAcceptance(out); err != nil {
		return err
	}
	if o.SVG != "" {
		if err := writeFile(o.SVG, func(w io.Writer) error {
			return writeSVG(w, o.scenario, o.Styles, o.Clients, r.plotted(), o.Runs)
		}); err != nil {
			return err
		}
	}
	if o.MD != "" {
		if err := writeFile(o.MD, r.writeMarkdown); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
