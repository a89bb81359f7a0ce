package dataflow_test

import (
	"testing"

	"github.com/snapflow/snapflow/internal/dataflow"
)

func TestParamsDiff(t *testing.T) {
	build := func(params map[string]string) *dataflow.Plan {
		g := dataflow.New("params", dataflow.Params(params))
		src := dataflow.Generate(g, "src", 10, func(i int64) int64 { return i })
		dataflow.Sink(src, "sink", func(int64) error { return nil })
		p, err := dataflow.NewPlan(g)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := build(map[string]string{"records": "60000", "topic": "in"})
	q := build(map[string]string{"records": "20000", "window": "5s"})
	if p.Fingerprint != q.Fingerprint {
		t.Errorf("parameters changed the topology fingerprint: %s, %s", p.Fingerprint, q.Fingerprint)
	}
	if d := p.ParamsDiff(p.Params, "a", "b"); d != "" {
		t.Errorf("the same parameters differ: %s", d)
	}
	want := `"records" is "60000" on a but "20000" on b; "topic" is "in" on a but unset on b; "window" is unset on a but "5s" on b`
	if d := p.ParamsDiff(q.Params, "a", "b"); d != want {
		t.Errorf("diff:\n got %s\nwant %s", d, want)
	}
	g := dataflow.New("params", dataflow.Params(map[string]string{"a": "1"}), dataflow.Params(map[string]string{"b": "2"}))
	ps := g.Params()
	ps["c"] = "3" // a copy
	if got := g.Params(); len(got) != 2 || got["a"] != "1" || got["b"] != "2" {
		t.Errorf("merged params %v", got)
	}
}
