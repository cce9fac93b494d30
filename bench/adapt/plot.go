package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/pacer-go/pacer/internal/apisim"
)

// Plot geometry, in SVG user units (pixels).
const (
	panelW, panelH = 170, 78 // one style × client panel's plot area
	gapX, gapY     = 14, 26  // between panels (gapY leaves room for the caption)
	leftM, topM    = 96, 96  // row labels; title, legend and column heads
	rightM, botM   = 12, 34
)

// writeSVG draws a grid of small multiples, one panel per style (row) and
// client (column): stacked bars per time bin of the requests per second the
// server admitted (blue) and answered 429 (red), against the quota (dashed)
// and 0.9 × quota (dotted), with the window boundaries in light grey. Bars
// taller than the panel are clipped, with the peak written above the panel.
// results holds one run per cell; runs is how many pacer's cells had, of
// which results holds the median (report.plotted), said in the subtitle.
func writeSVG(w io.Writer, sc scenario, styles []apisim.Style, clients []clientKind, results map[runKey]outcome, runs int) error {
	cols, rows := len(clients), len(styles)
	width := max(leftM+cols*panelW+(cols-1)*gapX+rightM, 900) // room for the title and legend
	height := topM + rows*panelH + (rows-1)*gapY + botM + 14
	yMax := 2 * sc.quotaRate() // room to see overshoot; beyond it, clip
	bins := int((sc.Duration + sc.Bin - 1) / sc.Bin)
	binW := float64(panelW) / float64(bins)

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="11">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="22" font-size="15" font-weight="bold">Requests per second over time: each client against the same simulated API, per header style</text>`+"\n", leftM)
	p(`<text x="%d" y="40" fill="#444">quota %d per %v (%.0f req/s), %d workers, %v per run, %v bins; y axis 0 to %.0f req/s (2 × quota), taller bars clipped</text>`+"\n",
		leftM, sc.Quota, sc.Window, sc.quotaRate(), sc.Workers, sc.Duration, sc.Bin, yMax)
	// Legend.
	lx := leftM
	p(`<rect x="%d" y="50" width="12" height="10" fill="#3a78c2"/><text x="%d" y="59">admitted (200)</text>`+"\n", lx, lx+16)
	lx += 110
	p(`<rect x="%d" y="50" width="12" height="10" fill="#d9453d"/><text x="%d" y="59">rejected (429)</text>`+"\n", lx, lx+16)
	lx += 110
	p(`<line x1="%d" y1="55" x2="%d" y2="55" stroke="#222" stroke-dasharray="4 3"/><text x="%d" y="59">quota</text>`+"\n", lx, lx+18, lx+22)
	lx += 70
	p(`<line x1="%d" y1="55" x2="%d" y2="55" stroke="#222" stroke-dasharray="1 2"/><text x="%d" y="59">0.9 × quota</text>`+"\n", lx, lx+18, lx+22)
	lx += 100
	p(`<text x="%d" y="59" fill="#444">grey: window resets; caption: goodput / quota · server 429s</text>`+"\n", lx)

	for c, kind := range clients {
		x := leftM + c*(panelW+gapX)
		median := ""
		if kind == clientPacer && runs > 1 {
			median = fmt.Sprintf(`<tspan font-weight="normal" font-size="10" fill="#444"> (median run of %d)</tspan>`, runs)
		}
		p(`<text x="%d" y="%d" text-anchor="middle" font-weight="bold" font-size="12">%s%s</text>`+"\n", x+panelW/2, topM-17, kind, median)
	}
	for r, style := range styles {
		y := topM + r*(panelH+gapY)
		p(`<text x="%d" y="%d" text-anchor="end" font-weight="bold" font-size="12">%s</text>`+"\n", leftM-10, y+panelH/2+4, style)
		for c, kind := range clients {
			x := leftM + c*(panelW+gapX)
			p(`<rect x="%d" y="%d" width="%d" height="%d" fill="#f7f7f7" stroke="#ccc"/>`+"\n", x, y, panelW, panelH)
			// Window boundaries: where fixed windows reset.
			for t := sc.Window; t < sc.Duration; t += sc.Window {
				gx := float64(x) + float64(t)/float64(sc.Duration)*panelW
				p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", gx, y, gx, y+panelH)
			}
			o, ok := results[runKey{style, kind}]
			if !ok {
				p(`<text x="%d" y="%d" text-anchor="middle" fill="#999">not run</text>`+"\n", x+panelW/2, y+panelH/2)
				continue
			}
			yOf := func(rps float64) float64 { return float64(y+panelH) - math.Min(rps, yMax)/yMax*panelH }
			peak := 0.0
			for i := range o.OKBins {
				okRate := float64(o.OKBins[i]) / sc.Bin.Seconds()
				tRate := float64(o.ThrottledBins[i]) / sc.Bin.Seconds()
				peak = math.Max(peak, okRate+tRate)
				bx := float64(x) + float64(i)*binW
				if okRate > 0 {
					p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3a78c2"/>`+"\n", bx, yOf(okRate), binW-0.6, float64(y+panelH)-yOf(okRate))
				}
				if tRate > 0 && okRate < yMax {
					top := yOf(okRate + tRate)
					p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d9453d"/>`+"\n", bx, top, binW-0.6, yOf(okRate)-top)
				}
			}
			q := yOf(sc.quotaRate())
			p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222" stroke-dasharray="4 3"/>`+"\n", x, q, x+panelW, q)
			s := yOf(0.9 * sc.quotaRate())
			p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222" stroke-dasharray="1 2"/>`+"\n", x, s, x+panelW, s)
			if peak > yMax {
				p(`<text x="%d" y="%d" text-anchor="end" font-size="9" fill="#d9453d">↑ peak %.0f/s</text>`+"\n", x+panelW, y-3, peak)
			}
			p(`<text x="%d" y="%d" fill="#222">%.2f · %s</text>`+"\n", x+2, y+panelH+13, o.Goodput(), plural(o.Throttled, "429"))
		}
	}
	// Time axis under the last row.
	ay := topM + rows*(panelH+gapY) - gapY + 26
	for c := range clients {
		x := leftM + c*(panelW+gapX)
		p(`<text x="%d" y="%d" fill="#666" font-size="9">0</text><text x="%d" y="%d" text-anchor="end" fill="#666" font-size="9">%v</text>`+"\n", x, ay, x+panelW, ay, sc.Duration)
	}
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
