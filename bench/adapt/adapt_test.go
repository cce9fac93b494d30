package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
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

// results builds a report where pacer meets every criterion, for tests to
// break one at a time.
func passing() report {
	o := options{scenario: scenario{Quota: 40, Window: 2 * time.Second, Duration: 6 * time.Second, Workers: 32, Bin: time.Second / 2}, Windows: 3}
	o.Styles, o.Clients = apisim.Styles(), allClients()
	res := map[runKey]outcome{}
	for _, s := range o.Styles {
		for _, k := range o.Clients {
			out := outcome{Style: s, Client: string(k), OK: 110, Allowed: 120, Throttled: 50, ThrottledAfterFirst: 49}
			if k == clientPacer {
				out.Throttled, out.ThrottledAfterFirst = 1, 0
			}
			res[runKey{s, k}] = out
		}
	}
	return report{options: o, results: res}
}

func TestAcceptancePassesWhenPacerMeetsEveryCriterion(t *testing.T) {
	for _, v := range passing().acceptance() {
		if !v.Ran || !v.Pass {
			t.Errorf("%s: %s %v", v.mark(), v.Text, v.Detail)
		}
	}
}

func TestAcceptanceNamesTheStyleAndFigureThatFail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		breaks func(map[runKey]outcome)
		want   []string // in the failing verdict's detail
	}{
		{"a 429 after the first response", func(m map[runKey]outcome) {
			o := m[runKey{apisim.StyleOpenAI, clientPacer}]
			o.Throttled, o.ThrottledAfterFirst = 3, 2
			m[runKey{apisim.StyleOpenAI, clientPacer}] = o
		}, []string{"openai: 2 after the first response (3 in all)"}},
		{"low goodput", func(m map[runKey]outcome) {
			o := m[runKey{apisim.StyleShopify, clientPacer}]
			o.OK = 90 // 0.75
			m[runKey{apisim.StyleShopify, clientPacer}] = o
		}, []string{"shopify: 0.750"}},
		{"more 429s than a reactive peer on retry-after", func(m map[runKey]outcome) {
			o := m[runKey{apisim.StyleRetryAfter, clientCubic}]
			o.Throttled = 1
			m[runKey{apisim.StyleRetryAfter, clientCubic}] = o
		}, []string{"pacer: 1 429s", "aws-cubic: 1 429s"}},
		{"low goodput on retry-after", func(m map[runKey]outcome) {
			o := m[runKey{apisim.StyleRetryAfter, clientPacer}]
			o.OK = 80
			m[runKey{apisim.StyleRetryAfter, clientPacer}] = o
		}, []string{"goodput 0.667"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := passing()
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
		})
	}
}

func TestAcceptanceIsNotRunWithoutPacer(t *testing.T) {
	r := passing()
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
	r := passing()
	for k, o := range r.results {
		o.OKBins, o.ThrottledBins = make([]int, 12), make([]int, 12)
		o.OKBins[0], o.ThrottledBins[0] = 30, 2000 // clipped, with a peak label
		r.results[k] = o
	}
	delete(r.results, runKey{apisim.StyleBare, clientCubic})
	var buf bytes.Buffer
	if err := writeSVG(&buf, r.scenario, r.Styles, r.Clients, r.results); err != nil {
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
	for _, want := range []string{"pacer", "aws-cubic", "retry-after", "not run", "↑ peak 4060/s", "0.92 · 1 429"} {
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
	for _, bad := range [][]string{
		{"-styles", "gitlab"}, {"-clients", "curl"}, {"-quota", "0"}, {"-window", "0s"},
		{"-windows", "0"}, {"-workers", "0"}, {"-latency", "-1ms"}, {"-algorithm", "leaky"}, {"extra"},
	} {
		var stderr bytes.Buffer
		if _, err := parseFlags(bad, &stderr); err == nil || !strings.Contains(stderr.String(), "adapt:") {
			t.Errorf("parseFlags(%q) = %v, stderr %q; want an error told to the user", bad, err, stderr.String())
		}
	}
}
