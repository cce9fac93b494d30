package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pacer-go/pacer/internal/apisim"
)

// tiny is a scenario of half a second per run: enough to exercise every
// client's code path, far too short to judge adaptation.
var tiny = scenario{Quota: 5, Window: 250 * time.Millisecond, Duration: 500 * time.Millisecond, Workers: 4, Bin: 125 * time.Millisecond}

func TestEveryClientRunsAndEveryCallIsAccountedFor(t *testing.T) {
	for _, kind := range allClients() {
		t.Run(string(kind), func(t *testing.T) {
			o, err := runOne(context.Background(), tiny, apisim.StyleIETF, kind)
			if err != nil {
				t.Fatal(err)
			}
			if o.Calls == 0 || o.Calls != o.Succeeded+o.Failed+o.CutOff {
				t.Errorf("calls %d ≠ succeeded %d + failed %d + cut off %d", o.Calls, o.Succeeded, o.Failed, o.CutOff)
			}
			if o.OK == 0 || o.OK > 2*tiny.Quota {
				t.Errorf("server admitted %d requests in two windows of %d", o.OK, tiny.Quota)
			}
			if o.ThrottledAfterFirst > o.Throttled {
				t.Errorf("%d 429s after the first response, of %d", o.ThrottledAfterFirst, o.Throttled)
			}
			if sum(o.OKBins) != o.OK || sum(o.ThrottledBins) != o.Throttled || len(o.OKBins) != 4 {
				t.Errorf("bins %v / %v do not add up to %d / %d", o.OKBins, o.ThrottledBins, o.OK, o.Throttled)
			}
			if o.AddedP50 > o.AddedP99 {
				t.Errorf("p50 %v > p99 %v", o.AddedP50, o.AddedP99)
			}
		})
	}
}

func TestPlainClientHandsThrottlesToTheCaller(t *testing.T) {
	o, err := runOne(context.Background(), tiny, apisim.StyleBare, clientPlain)
	if err != nil {
		t.Fatal(err)
	}
	if o.Throttled == 0 || o.Failed < o.Throttled-o.CutOff {
		t.Errorf("server 429s %d, caller errors %d (cut off %d): every 429 should reach the caller", o.Throttled, o.Failed, o.CutOff)
	}
	if o.AddedP99 > 50*time.Millisecond {
		t.Errorf("added p99 %v: a plain client adds no waiting", o.AddedP99)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// passing builds a report where pacer meets every criterion in each of its
// runs (the peers ran once), for tests to break one at a time.
func passing(runs int) report {
	o := options{scenario: scenario{Quota: 40, Window: 2 * time.Second, Duration: 6 * time.Second, Workers: 32, Bin: time.Second / 2}, Windows: 3, Runs: runs, Parallel: 5}
	o.Styles, o.Clients = apisim.Styles(), allClients()
	res := map[runKey][]outcome{}
	for _, s := range o.Styles {
		for _, k := range o.Clients {
			for range o.runsOf(k) {
				out := outcome{Style: s, Client: string(k), OK: 110, Allowed: 120, Throttled: 50, ThrottledAfterFirst: 49}
				if k == clientPacer {
					out.Throttled, out.ThrottledAfterFirst = 1, 0
				}
				res[runKey{s, k}] = append(res[runKey{s, k}], out)
			}
		}
	}
	return report{options: o, results: res}
}

// set changes run i of a cell.
func set(m map[runKey][]outcome, style apisim.Style, kind clientKind, i int, f func(*outcome)) {
	f(&m[runKey{style, kind}][i])
}

func TestAcceptancePassesWhenPacerMeetsEveryCriterion(t *testing.T) {
	for _, runs := range []int{1, 3} {
		for _, v := range passing(runs).acceptance() {
			if !v.Ran || !v.Pass || v.Runs != runs || v.Held != runs {
				t.Errorf("%d runs: %s (held in %d of %d runs): %s %v", runs, v.mark(), v.Held, v.Runs, v.Text, v.Detail)
			}
		}
	}
}

func TestAcceptanceNamesTheStyleAndFigureThatFail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		runs   int
		breaks func(map[runKey][]outcome)
		want   []string // in the failing verdict's detail
	}{
		{"a 429 after the first response", 1, func(m map[runKey][]outcome) {
			set(m, apisim.StyleOpenAI, clientPacer, 0, func(o *outcome) { o.Throttled, o.ThrottledAfterFirst = 3, 2 })
		}, []string{"openai: 2 after the first response (3 in all)"}},
		{"low goodput", 1, func(m map[runKey][]outcome) {
			set(m, apisim.StyleShopify, clientPacer, 0, func(o *outcome) { o.OK = 90 }) // 0.75
		}, []string{"shopify: 0.750"}},
		{"more 429s than a reactive peer on retry-after", 1, func(m map[runKey][]outcome) {
			set(m, apisim.StyleRetryAfter, clientCubic, 0, func(o *outcome) { o.Throttled = 1 })
		}, []string{"pacer: 1 429s", "aws-cubic: 1 429s"}},
		{"low goodput on retry-after", 1, func(m map[runKey][]outcome) {
			set(m, apisim.StyleRetryAfter, clientPacer, 0, func(o *outcome) { o.OK = 80 })
		}, []string{"goodput 0.667"}},
		// Over several runs, one bad run fails the criterion, named by its run.
		{"a 429 after the first response in one run of 3", 3, func(m map[runKey][]outcome) {
			set(m, apisim.StyleOpenAI, clientPacer, 1, func(o *outcome) { o.Throttled, o.ThrottledAfterFirst = 3, 2 })
		}, []string{"openai, run 2: 2 after the first response (3 in all)"}},
		{"low goodput in one run of 3", 3, func(m map[runKey][]outcome) {
			set(m, apisim.StyleShopify, clientPacer, 2, func(o *outcome) { o.OK = 90 })
		}, []string{"shopify, run 3: 0.750"}},
		{"more 429s than a reactive peer in one run of 3", 3, func(m map[runKey][]outcome) {
			set(m, apisim.StyleRetryAfter, clientPacer, 0, func(o *outcome) { o.Throttled = 50 })
		}, []string{"pacer: 1 (50) 429s", "aws-cubic: 50 429s", "run 1: 50 429s, goodput 0.917"}},
		{"low goodput on retry-after in one run of 3", 3, func(m map[runKey][]outcome) {
			set(m, apisim.StyleRetryAfter, clientPacer, 2, func(o *outcome) { o.OK = 80 })
		}, []string{"goodput 0.917 (0.667)", "run 3: 1 429s, goodput 0.667"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := passing(tc.runs)
			tc.breaks(r.results)
			failed := 0
			for _, v := range r.acceptance() {
				if v.Pass {
					continue
				}
				failed++
				detail := strings.Join(v.Detail, "; ")
				for _, w := range tc.want {
					if !strings.Contains(detail, w) {
						t.Errorf("verdict %q detail %q lacks %q", v.Text, detail, w)
					}
				}
			}
			if failed != 1 {
				t.Errorf("%d verdicts failed, want 1", failed)
			}
			var b strings.Builder
			if err := r.writeAcceptance(&b); err != nil {
				t.Fatal(err)
			}
			want := "**FAIL**: "
			if tc.runs > 1 {
				want = fmt.Sprintf("**FAIL** (held in %d of %d runs): ", tc.runs-1, tc.runs)
			}
			if !strings.Contains(b.String(), want) {
				t.Errorf("acceptance lacks %q:\n%s", want, b.String())
			}
		})
	}
}

func TestTableShowsTheMedianAndTheWorstRun(t *testing.T) {
	r := passing(3)
	for i, ok := range []int{120, 90, 108} { // goodput 1.00, 0.75, 0.90
		set(r.results, apisim.StyleGitHub, clientPacer, i, func(o *outcome) {
			o.OK, o.Calls, o.AddedP99 = ok, ok, time.Duration(i+1)*time.Second
		})
	}
	var b strings.Builder
	if err := r.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	// Median and (worst): lower goodput and calls, higher latency; 429s
	// equal in every run, so shown once.
	want := "| github | **pacer** | 0.90 (0.75) | 1 | 0 | 0 | 0 | 108 (90) | 0 | 2.0s (3.0s) |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
	if want := "| github | net/http | 0.92 | 50 | 49 |"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q (a peer's one run):\n%s", want, b.String())
	}
	// The plot shows the median run by goodput.
	if got := r.plotted()[runKey{apisim.StyleGitHub, clientPacer}]; got.OK != 108 {
		t.Errorf("plotted pacer's run with %d OK, want the median run (108)", got.OK)
	}
}

// TestBenchmarkRunsPacerNTimes runs the command end to end in short form
// (two styles, pacer and net/http, -runs 2, half-second runs) and checks that
// every part of the output speaks of the runs. Too short to judge
// adaptation: whether the criteria pass is not checked.
func TestBenchmarkRunsPacerNTimes(t *testing.T) {
	dir := t.TempDir()
	md, svg := filepath.Join(dir, "RESULTS.md"), filepath.Join(dir, "adapt.svg")
	o, err := parseFlags([]string{"-runs", "2", "-quota", "5", "-window", "250ms", "-windows", "2", "-workers", "4",
		"-styles", "ietf,retry-after", "-clients", "pacer,net/http", "-parallel", "6", "-md", md, "-svg", svg}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out, progress bytes.Buffer
	if err := benchmark(context.Background(), o, &out, &progress); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(progress.String(), "pacer 1/2") + strings.Count(progress.String(), "pacer 2/2"); n != 4 {
		t.Errorf("progress reports %d of pacer's 4 runs:\n%s", n, progress.String())
	}
	if n := strings.Count(progress.String(), "net/http"); n != 2 {
		t.Errorf("progress reports %d runs of net/http, want 2 (once per style):\n%s", n, progress.String())
	}
	for _, want := range []string{"| ietf | **pacer** |", "| retry-after | net/http |", " of 2 runs): "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if got := strings.Count(out.String(), " of 2 runs): "); got != 3 {
		t.Errorf("%d verdicts say in how many of 2 runs they held, want 3:\n%s", got, out.String())
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pacer's cells ran 2 times each", "its median run of 2", "-runs 2", "for 6 runs, 6 at a time"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q:\n%s", md, want, b)
		}
	}
	b, err = os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil || !strings.Contains(string(b), "median run of 2") {
		t.Errorf("%s: %v, or it does not say pacer's panels show the median run", svg, err)
	}
}

func TestAcceptanceIsNotRunWithoutPacer(t *testing.T) {
	r := passing(1)
	r.Clients = []clientKind{clientPlain}
	for k := range r.results {
		if k.Client == clientPacer {
			delete(r.results, k)
		}
	}
	for _, v := range r.acceptance() {
		if v.Ran {
			t.Errorf("%q ran without pacer results", v.Text)
		}
	}
}

func TestSVGIsWellFormedWithAPanelPerRun(t *testing.T) {
	r := passing(3)
	for _, rs := range r.results {
		for i := range rs {
			rs[i].OKBins, rs[i].ThrottledBins = make([]int, 12), make([]int, 12)
			rs[i].OKBins[0], rs[i].ThrottledBins[0] = 30, 2000 // clipped, with a peak label
		}
	}
	delete(r.results, runKey{apisim.StyleBare, clientCubic})
	var buf bytes.Buffer
	if err := writeSVG(&buf, r.scenario, r.Styles, r.Clients, r.plotted(), r.Runs); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&buf)
	texts := 0
	var all strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			all.Write(cd)
			texts++
		}
	}
	s := all.String()
	for _, want := range []string{"pacer", "(median run of 3)", "aws-cubic", "retry-after", "not run", "↑ peak 4060/s", "0.92 · 1 429"} {
		if !strings.Contains(s, want) {
			t.Errorf("plot text lacks %q", want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-styles", "retry-after,github", "-clients", "aws-cubic,pacer", "-window", "3s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Styles; len(got) != 2 || got[0] != apisim.StyleGitHub || got[1] != apisim.StyleRetryAfter {
		t.Errorf("styles %v, want [github retry-after] (apisim order)", got)
	}
	if got := o.Clients; len(got) != 2 || got[0] != clientPacer || got[1] != clientCubic {
		t.Errorf("clients %v, want [pacer aws-cubic] (table order)", got)
	}
	if o.Duration != 9*time.Second || o.Bin != 750*time.Millisecond {
		t.Errorf("duration %v, bin %v; want 9s (3 windows of 3s), 750ms", o.Duration, o.Bin)
	}
	if o.Runs != 1 || o.runsOf(clientPacer) != 1 || o.runsOf(clientCubic) != 1 {
		t.Errorf("runs %d, pacer's %d, aws-cubic's %d; want 1 by default", o.Runs, o.runsOf(clientPacer), o.runsOf(clientCubic))
	}
	if o, err := parseFlags(nil, io.Discard); err != nil || slices.Contains(o.Styles, apisim.StyleReddit) || slices.Contains(o.Styles, apisim.StyleMastodon) ||
		slices.Contains(o.Styles, apisim.StyleGitLab) || !slices.Contains(o.Styles, apisim.StyleX) || len(o.Styles) != len(apisim.Styles())-3 {
		t.Errorf("default styles %v, %v; want every style but reddit, mastodon and gitlab", o.Styles, err)
	}
	if o, err := parseFlags([]string{"-styles", "all"}, io.Discard); err != nil || !slices.Equal(o.Styles, apisim.Styles()) {
		t.Errorf("-styles all: %v, %v; want every style", o.Styles, err)
	}
	if o, err := parseFlags([]string{"-runs", "5"}, io.Discard); err != nil || o.runsOf(clientPacer) != 5 || o.runsOf(clientPlain) != 1 {
		t.Errorf("-runs 5: %v, pacer's runs %d, net/http's %d; want 5 and 1", err, o.runsOf(clientPacer), o.runsOf(clientPlain))
	}
	for _, bad := range [][]string{
		{"-styles", "bitbucket"}, {"-clients", "curl"}, {"-quota", "0"}, {"-window", "0s"},
		{"-windows", "0"}, {"-workers", "0"}, {"-runs", "0"}, {"-latency", "-1ms"}, {"-algorithm", "leaky"}, {"extra"},
	} {
		var stderr bytes.Buffer
		if _, err := parseFlags(bad, &stderr); err == nil || !strings.Contains(stderr.String(), "adapt:") {
			t.Errorf("parseFlags(%q) = %v, stderr %q; want an error told to the user", bad, err, stderr.String())
		}
	}
}
