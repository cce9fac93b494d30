package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// compare runs the job of cfg twice, first with a plain http.Client, then
// through pacer, each with its usual progress and summary, and ends with both
// summaries side by side: what the product changes, on one screen.
func compare(ctx context.Context, cfg config, out io.Writer, tty bool) (plain, paced result, err error) {
	for i, client := range []string{clientPlain, clientPacer} {
		c := cfg
		c.Client = client
		fmt.Fprintf(out, "── run %d of 2: %s ──\n", i+1, clientTitle(client))
		r, err := run(ctx, c, out, tty)
		if err != nil {
			return plain, paced, err
		}
		if client == clientPlain {
			plain = r
		} else {
			paced = r
		}
		fmt.Fprintln(out)
	}
	printComparison(out, cfg, plain, paced)
	return plain, paced, nil
}

func clientTitle(client string) string {
	if client == clientPlain {
		return "plain http.Client"
	}
	return "through pacer"
}

// printComparison prints the two runs' figures in two columns.
func printComparison(out io.Writer, cfg config, plain, paced result) {
	rows := [][3]string{
		{"", clientTitle(clientPlain), clientTitle(clientPacer)},
		{"succeeded", fmt.Sprintf("%d/%d", plain.Succeeded, cfg.N), fmt.Sprintf("%d/%d", paced.Succeeded, cfg.N)},
		{"handed back a 429", fmt.Sprint(plain.Rejected), fmt.Sprint(paced.Rejected)},
		{"errors", fmt.Sprint(plain.Errors), fmt.Sprint(paced.Errors)},
		{"time", plain.Elapsed.Round(100 * time.Millisecond).String(), paced.Elapsed.Round(100 * time.Millisecond).String()},
		{"server requests", fmt.Sprint(plain.Server.Requests), fmt.Sprint(paced.Server.Requests)},
		{"server 429s", fmt.Sprint(plain.Server.Throttled), fmt.Sprint(paced.Server.Throttled)},
		{"  after 1st response", fmt.Sprint(plain.ThrottledAfterFirst), fmt.Sprint(paced.ThrottledAfterFirst)},
		{"goodput × quota", goodput(cfg, plain), goodput(cfg, paced)},
		{"retries", "–", fmt.Sprint(paced.Retries)},
	}
	fmt.Fprintf(out, "compare: the same %d requests, %d at a time, against the same API\n", cfg.N, cfg.Concurrency)
	w0, w1 := 0, 0
	for _, r := range rows {
		w0 = max(w0, len([]rune(r[0])))
		w1 = max(w1, len([]rune(r[1])))
	}
	for _, r := range rows {
		fmt.Fprintf(out, "  %s  %s  %s\n", pad(r[0], w0, false), pad(r[1], w1, true), r[2])
	}
}

// goodput is Goodput as the summary tells it: a run shorter than one window
// spends a fresh quota, so its rate says nothing about pacing.
func goodput(cfg config, r result) string {
	switch {
	case r.Allowed <= 0:
		return "–"
	case r.Elapsed < cfg.Window && r.Goodput() > 1:
		return "< 1 window"
	}
	return fmt.Sprintf("%.2f", r.Goodput())
}

// pad pads s with spaces to width runes, on the left when right is set.
func pad(s string, width int, right bool) string {
	fill := strings.Repeat(" ", max(0, width-len([]rune(s))))
	if right {
		return fill + s
	}
	return s + fill
}
