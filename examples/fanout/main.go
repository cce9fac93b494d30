// Command fanout is pacer's main-job demo, the README's first command
// (`make demo`): it starts a simulated rate-limited API on loopback, fans out
// requests to it through a pacer Executor and Transport, shows a live progress
// bar, and ends with what the server saw: how many 429s, and how much of the
// quota the job used.
//
// Nothing leaves the machine: the API is internal/apisim, served on
// 127.0.0.1 on a free port, speaking a real provider's rate-limit headers.
//
//	go run ./examples/fanout                          # GitHub-style API, 100 requests per 5 s
//	go run ./examples/fanout -style retry-after       # a server that only sends Retry-After on 429
//	go run ./examples/fanout -style bare -n 200       # bare 429s: pacer probes for the limit
//	go run ./examples/fanout -unseen 0.3              # another client spends 30% of the quota
//	go run ./examples/fanout -client plain            # the same job without pacer
//	go run ./examples/fanout -compare                 # both, then side by side
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	tty := isTerminal(os.Stdout)
	if cfg.Compare {
		_, _, err = compare(ctx, cfg, os.Stdout, tty)
	} else {
		_, err = run(ctx, cfg, os.Stdout, tty)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// Client kinds for -client.
const (
	clientPacer = "pacer" // Executor + pacer Transport: the point of the demo
	clientPlain = "plain" // Executor + a plain http.Client: what pacer prevents
)

// defaults make the default run span several windows, so the pacing shows,
// and finish well within 30 seconds.
func defaults() config {
	return config{
		Style:       apisim.StyleGitHub,
		Quota:       100,
		Window:      5 * time.Second,
		N:           320,
		Concurrency: 32,
		Safety:      0.9,
		Latency:     20 * time.Millisecond,
		Client:      clientPacer,
	}
}

// parseFlags reads the command line into a config; usage and errors go to
// stderr. It returns flag.ErrHelp for -h.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaults()
	fs := flag.NewFlagSet("fanout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	styles := make([]string, 0, len(apisim.Styles()))
	for _, s := range apisim.Styles() {
		styles = append(styles, string(s))
	}
	style := fs.String("style", string(cfg.Style), "rate-limit header style of the simulated API: "+strings.Join(styles, ", "))
	algorithm := fs.String("algorithm", "", "how the API counts: fixed-window, sliding-window or token-bucket (default: fixed-window; token-bucket for shopify)")
	fs.IntVar(&cfg.Quota, "quota", cfg.Quota, "requests the API allows per window")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "the API's quota window")
	fs.IntVar(&cfg.N, "n", cfg.N, "number of requests to fan out")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "requests in flight at most (Executor slots)")
	fs.Float64Var(&cfg.Safety, "safety", cfg.Safety, "fraction of the learned quota pacer uses, in (0, 1]")
	fs.DurationVar(&cfg.Latency, "latency", cfg.Latency, "the API's service time per request")
	fs.Float64Var(&cfg.Unseen, "unseen", cfg.Unseen, "share of the quota, in [0, 1), used by another client this one cannot see")
	fs.StringVar(&cfg.Client, "client", cfg.Client, `"pacer" (Executor + pacer Transport) or "plain" (Executor + plain http.Client, to compare)`)
	fs.BoolVar(&cfg.Compare, "compare", cfg.Compare, "run the job twice, plain then through pacer (-client is ignored), and print both summaries side by side")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: fanout [flags]\n\nFans out requests to a simulated rate-limited API on loopback through a pacer\nExecutor and Transport, and reports what the server saw.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q", fs.Arg(0))
		fmt.Fprintln(stderr, "fanout:", err)
		fs.Usage()
		return config{}, err
	}
	cfg.Style, cfg.Algorithm = apisim.Style(*style), apisim.Algorithm(*algorithm)
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(stderr, "fanout:", err)
		return config{}, err
	}
	return cfg, nil
}

// isTerminal reports whether f is a terminal, where the progress bar redraws
// one line; elsewhere (a pipe, a CI log) progress is printed as plain lines.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
