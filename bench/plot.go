package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Sizes of the plot's image: two panels side by side, and a column on their
// right for the legend, outside both plotting areas so that it covers no
// data.
const (
	plotWidth   = 1000
	plotHeight  = 360
	legendWidth = 100
)

// plotModes are the modes drawn, in legend order, with their colours; the
// baselines are dashed flat lines.
var plotModes = []struct {
	mode  string
	color color.Color
}{
	{"abs", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
	{"sync", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	{"cluster", color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
	{"protoactor", color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
	{"channels", color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}},
}

// plotRows draws rows into a PNG at path: the rows of -sweep incremental
// as drawIncremental does, the others as drawRows does.
func plotRows(path string, rows []Row) error {
	draw := drawRows
	for _, r := range rows {
		if r.Checkpointing != "" {
			draw = drawIncremental
		}
	}
	img, _, err := draw(rows)
	if err != nil {
		return err
	}
	return saveImage(path, img)
}

// plotLayout is where drawRows put the legend and the two plotting areas.
type plotLayout struct {
	legend vg.Rectangle
	data   [2]vg.Rectangle
}

// drawRows draws, for the abs, sync and cluster rows, throughput and p99 latency
// against the checkpoint interval, with the baselines as flat lines, and one
// legend beside both panels. A value that was not measured is left out.
func drawRows(rows []Row) (*vgimg.Canvas, plotLayout, error) {
	var layout plotLayout
	var intervals []string
	seen := map[string]bool{}
	for _, r := range rows {
		if !r.baseline() && !seen[r.Interval] {
			seen[r.Interval] = true
			intervals = append(intervals, r.Interval)
		}
	}
	if len(intervals) == 0 {
		return nil, layout, fmt.Errorf("bench: plot: no abs, sync or cluster rows to draw")
	}
	index := map[string]float64{}
	for i, iv := range intervals {
		index[iv] = float64(i)
	}
	tp := plot.New()
	tp.Title.Text = "throughput"
	tp.Y.Label.Text = "million records/s"
	lat := plot.New()
	lat.Title.Text = "end-to-end latency p99"
	lat.Y.Label.Text = "ms"
	for _, p := range []*plot.Plot{tp, lat} {
		p.X.Label.Text = "checkpoint interval"
		p.NominalX(intervals...)
		p.Y.Min = 0
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	last := float64(len(intervals) - 1)
	for _, pm := range plotModes {
		var thr, l99 plotter.XYs
		add := func(xy *plotter.XYs, m metric, scale float64, x ...float64) {
			if v, ok := m.value(); ok {
				for _, x := range x {
					*xy = append(*xy, plotter.XY{X: x, Y: v * scale})
				}
			}
		}
		for _, r := range rows {
			switch {
			case r.Mode != pm.mode:
			case r.baseline(): // flat reference lines across every interval
				add(&thr, r.RecordsPerSec, 1e-6, 0, last)
				add(&l99, r.LatencyP99Ms, 1, 0, last)
			default:
				add(&thr, r.RecordsPerSec, 1e-6, index[r.Interval])
				add(&l99, r.LatencyP99Ms, 1, index[r.Interval])
			}
		}
		var thumb plot.Thumbnailer
		for _, pair := range []struct {
			p  *plot.Plot
			xy plotter.XYs
		}{{tp, thr}, {lat, l99}} {
			if len(pair.xy) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pair.xy)
			if err != nil {
				return nil, layout, fmt.Errorf("bench: plot %s: %w", pm.mode, err)
			}
			line.Color, points.Color = pm.color, pm.color
			if pm.mode == "protoactor" || pm.mode == "channels" {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			pair.p.Add(line, points)
			thumb = line
		}
		if thumb != nil {
			legend.Add(pm.mode, thumb)
		}
	}
	img, layout := drawPanels(tp, lat, legend)
	return img, layout, nil
}

// drawPanels draws two plots side by side and their legend in a column on
// their right, its top level with the top of the plotting areas.
func drawPanels(left, right *plot.Plot, legend plot.Legend) (*vgimg.Canvas, plotLayout) {
	var layout plotLayout
	img := vgimg.New(vg.Points(plotWidth), vg.Points(plotHeight))
	dc := draw.New(img)
	panels := draw.Crop(dc, 0, -vg.Points(legendWidth), 0, 0)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, panels)
	for i, p := range []*plot.Plot{left, right} {
		p.Draw(canvases[0][i])
		layout.data[i] = p.DataCanvas(canvases[0][i]).Rectangle
	}
	side := draw.Crop(dc, dc.Max.X-dc.Min.X-vg.Points(legendWidth), 0, 0, layout.data[0].Max.Y-dc.Max.Y)
	legend.Draw(side)
	layout.legend = legend.Rectangle(side)
	return img, layout
}
