package main

import (
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

// incrementalKinds are the checkpoint kinds drawIncremental draws, in
// legend order, with their colours.
var incrementalKinds = []struct {
	kind  string
	color color.Color
}{
	{"full", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	{"incremental", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
}

// drawIncremental draws the rows of -sweep incremental: the bytes uploaded
// per checkpoint and the checkpoint p99, as bars of full and incremental
// side by side at each interval, each labelled with its value (the upload
// also as a share of the state). A value not measured has no bar.
func drawIncremental(rows []Row) (*vgimg.Canvas, plotLayout, error) {
	var intervals []string
	index := map[string]int{}
	for _, r := range rows {
		if _, seen := index[r.Interval]; r.Checkpointing != "" && !seen {
			index[r.Interval] = len(intervals)
			intervals = append(intervals, r.Interval)
		}
	}
	if len(intervals) == 0 {
		return nil, plotLayout{}, fmt.Errorf("bench: plot: no rows of -sweep incremental to draw")
	}
	up := plot.New()
	up.Title.Text = "uploaded per checkpoint"
	up.Y.Label.Text = "MiB"
	p99 := plot.New()
	p99.Title.Text = "checkpoint p99"
	p99.Y.Label.Text = "ms"
	for _, p := range []*plot.Plot{up, p99} {
		p.X.Label.Text = "checkpoint interval"
		p.NominalX(intervals...)
		p.Y.Min = 0
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	width := vg.Points(28)
	for i, k := range incrementalKinds {
		upVals, p99Vals := make(plotter.Values, len(intervals)), make(plotter.Values, len(intervals))
		upLabels, p99Labels := make([]string, len(intervals)), make([]string, len(intervals))
		drawn := false
		for _, r := range rows {
			if r.Checkpointing != k.kind {
				continue
			}
			x := index[r.Interval]
			if v, ok := r.UploadedBytesPerCkpt.value(); ok {
				upVals[x], upLabels[x], drawn = v/(1<<20), thousands(v/(1<<20), 1), true
				if share, ok := uploadedShare(r).value(); ok {
					upLabels[x] += " (" + strconv.FormatFloat(100*share, 'f', 1, 64) + "%)"
				}
			}
			if v, ok := r.CkptP99Ms.value(); ok {
				p99Vals[x], p99Labels[x], drawn = v, thousands(v, 0), true
			}
		}
		if !drawn {
			continue
		}
		offset := width * vg.Length(2*i-len(incrementalKinds)+1) / 2
		for _, panel := range []struct {
			p      *plot.Plot
			vals   plotter.Values
			labels []string
		}{{up, upVals, upLabels}, {p99, p99Vals, p99Labels}} {
			bars, err := plotter.NewBarChart(panel.vals, width)
			if err != nil {
				return nil, plotLayout{}, fmt.Errorf("bench: plot %s: %w", k.kind, err)
			}
			bars.Color, bars.LineStyle.Width, bars.Offset = k.color, 0, offset
			xys := make(plotter.XYs, len(panel.vals))
			for x, v := range panel.vals {
				xys[x] = plotter.XY{X: float64(x), Y: v}
			}
			labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: panel.labels})
			if err != nil {
				return nil, plotLayout{}, fmt.Errorf("bench: plot %s: %w", k.kind, err)
			}
			for j := range labels.TextStyle {
				labels.TextStyle[j].XAlign = -0.5
				labels.Offset = vg.Point{X: offset, Y: vg.Points(2)}
			}
			panel.p.Add(bars, labels)
			if panel.p == up {
				legend.Add(k.kind, bars)
			}
		}
	}
	for _, p := range []*plot.Plot{up, p99} {
		p.Y.Max *= 1.15 // room for the labels of the tallest bars
	}
	img, layout := drawPanels(up, p99, legend)
	return img, layout, nil
}
