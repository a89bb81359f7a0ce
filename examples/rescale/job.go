package main

import (
	"fmt"

	"github.com/snapflow/snapflow/topology"
)

// The job: the orders of two shop fronts, web and shop, are merged and
// keyed by customer into totals, which keeps each customer's number of
// orders and the sum of their amounts.
const (
	jobName = "rescale"
	// maxParallelism is the number of key groups. It must never change
	// between savepoints of a job (a restore refuses it): every key would
	// move to another key group.
	maxParallelism = 128
	// The operator ids that savepoints map state to. They stay the same
	// whatever the operators are called or how many tasks they run.
	webID    = "web-orders"
	shopID   = "shop-orders"
	totalsID = "customer-totals"
	// The state names of totals.
	stateOrders = "orders"
	stateAmount = "amount"
)

// order is one order: its customer and its amount in cents.
type order struct {
	Customer int64
	Amount   int64
}

// total is a customer's running total, as totals emits it.
type total struct {
	Customer, Orders, Amount int64
}

// shape is the job's data: records orders in all, keys customers.
type shape struct {
	records int64
	keys    int64
}

// webCount and shopCount are how many orders each source produces.
func (s shape) webCount() int64  { return s.records - s.records/2 }
func (s shape) shopCount() int64 { return s.records / 2 }

// Web order i is customer i % keys's, for i+1 cents; shop order i is
// customer i % keys's, for 1000 + 2*i cents.
func (s shape) webOrder(i int64) order  { return order{Customer: i % s.keys, Amount: i + 1} }
func (s shape) shopOrder(i int64) order { return order{Customer: i % s.keys, Amount: 1000 + 2*i} }

// build returns the job with every operator at parallelism par. Its
// sources produce nothing at or beyond gate's limit.
func (s shape) build(par int, gt *gate) *topology.Graph {
	g := topology.New(jobName, topology.MaxParallelism(maxParallelism))
	web := addOrders(g, "web", webID, s.webCount(), s.webOrder, gt, par)
	shop := addOrders(g, "shop", shopID, s.shopCount(), s.shopOrder, gt, par)
	byCustomer := topology.KeyBy(topology.Union(web, shop), func(o order) int64 { return o.Customer })
	totals := topology.Process(byCustomer, "totals", func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, order, total] {
		// Keyed state: each customer's own values, stored by key group,
		// which is how a savepoint is redistributed over new tasks.
		count := topology.Value[int64](ks, stateOrders)
		amount := topology.Value[int64](ks, stateAmount)
		return func(ctx *topology.Context[int64], o order, out *topology.Collector[total]) error {
			n, _ := count.Get()
			a, _ := amount.Get()
			n, a = n+1, a+o.Amount
			count.Set(n)
			amount.Set(a)
			out.Emit(total{Customer: ctx.Key(), Orders: n, Amount: a})
			return nil
		}
	}, topology.Parallelism(par), topology.OperatorID(totalsID))
	// A real job writes the totals somewhere that keeps the newest per
	// customer: sinks are at-least-once, and rewrite after a restore.
	topology.Sink(totals, "discard", func(total) error { return nil }, topology.Parallelism(par))
	return g
}

// addOrders adds a split source of count orders: gen(0), gen(1), ...
func addOrders(g *topology.Graph, name, id string, count int64, gen func(int64) order, gt *gate, par int) topology.Stream[order] {
	return topology.FromSplits(g, name, orderSplits(count), func(subtask, _ int) topology.SplitSource[order] {
		return &orderSource{task: fmt.Sprintf("%s#%d", name, subtask), count: count, gen: gen, gate: gt}
	}, topology.Parallelism(par), topology.OperatorID(id))
}

// sourceTasks returns the gate keys of the source tasks at parallelism par.
func sourceTasks(par int) []string {
	var out []string
	for _, name := range []string{"web", "shop"} {
		for i := range par {
			out = append(out, fmt.Sprintf("%s#%d", name, i))
		}
	}
	return out
}

// customerTotals is a customer's orders and amount.
type customerTotals struct{ orders, amount int64 }

// want returns, in closed form, every customer's totals once both sources
// have produced all their orders.
func (s shape) want() map[int64]customerTotals {
	out := map[int64]customerTotals{}
	for c := range s.keys {
		// Web: the indices i = c + keys*t below webCount, i+1 cents each.
		wn := classSize(s.webCount(), s.keys, c)
		wa := wn*(c+1) + s.keys*wn*(wn-1)/2
		// Shop: the indices i = c + keys*t below shopCount, 1000+2i cents.
		sn := classSize(s.shopCount(), s.keys, c)
		sa := sn*(1000+2*c) + 2*s.keys*sn*(sn-1)/2
		if wn+sn > 0 {
			out[c] = customerTotals{orders: wn + sn, amount: wa + sa}
		}
	}
	return out
}

// classSize is how many i in [0, n) have i % k == c.
func classSize(n, k, c int64) int64 {
	if c >= n {
		return 0
	}
	return (n - c + k - 1) / k
}
