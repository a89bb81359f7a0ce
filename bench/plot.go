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

// plotRows draws, for the abs and sync rows, throughput and p99 latency
// against the checkpoint interval, with the baselines as flat lines.
func plotRows(path string, rows []Row) error {
	var intervals []string
	seen := map[string]bool{}
	for _, r := range rows {
		if (r.Mode == "abs" || r.Mode == "sync") && !seen[r.Interval] {
			seen[r.Interval] = true
			intervals = append(intervals, r.Interval)
		}
	}
	if len(intervals) == 0 {
		return fmt.Errorf("plot: no abs or sync rows to draw")
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
		p.Legend.Top = true
		p.Y.Min = 0
	}
	colors := map[string]color.Color{
		"abs": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, "sync": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		"protoactor": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, "channels": color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	}
	for _, mode := range []string{"abs", "sync", "protoactor", "channels"} {
		var thr, l99 plotter.XYs
		for _, r := range rows {
			if r.Mode != mode {
				continue
			}
			if mode == "protoactor" || mode == "channels" { // flat reference lines
				thr = append(thr, plotter.XY{X: 0, Y: r.RecordsPerSec / 1e6}, plotter.XY{X: float64(len(intervals) - 1), Y: r.RecordsPerSec / 1e6})
				l99 = append(l99, plotter.XY{X: 0, Y: r.LatencyP99Ms}, plotter.XY{X: float64(len(intervals) - 1), Y: r.LatencyP99Ms})
				continue
			}
			thr = append(thr, plotter.XY{X: index[r.Interval], Y: r.RecordsPerSec / 1e6})
			l99 = append(l99, plotter.XY{X: index[r.Interval], Y: r.LatencyP99Ms})
		}
		if len(thr) == 0 {
			continue
		}
		for _, pair := range []struct {
			p  *plot.Plot
			xy plotter.XYs
		}{{tp, thr}, {lat, l99}} {
			line, points, err := plotter.NewLinePoints(pair.xy)
			if err != nil {
				return err
			}
			line.Color, points.Color = colors[mode], colors[mode]
			if mode == "protoactor" || mode == "channels" {
				line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			pair.p.Add(line, points)
			pair.p.Legend.Add(mode, line)
		}
	}
	img := vgimg.New(vg.Points(900), vg.Points(360))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{tp, lat}}, tiles, dc)
	tp.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])
	return saveImage(path, img)
}
