package main

import (
	"fmt"
	"slices"

	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// stored is what a checkpoint or savepoint of the job holds, read back
// from the store.
type stored struct {
	totals map[int64]customerTotals
	// produced is how many orders the sources had produced, from their
	// splits.
	produced int64
	// totalsTasks is how many tasks of totals it holds.
	totalsTasks int
}

// readStored decodes rp's state: totals' keyed state (by operator id, so
// renaming the operator would not matter) and the sources' splits.
func readStored(rp *snapshots.Restorable) (stored, error) {
	out := stored{totals: map[int64]customerTotals{}}
	for id, st := range rp.States {
		switch st.GetOperatorId() {
		case totalsID:
			out.totalsTasks++
			orders, err := topology.DecodeValueState[int64, int64](st, stateOrders)
			if err != nil {
				return out, fmt.Errorf("rescale: task %s: %w", id, err)
			}
			amounts, err := topology.DecodeValueState[int64, int64](st, stateAmount)
			if err != nil {
				return out, fmt.Errorf("rescale: task %s: %w", id, err)
			}
			for c, n := range orders {
				if _, dup := out.totals[c]; dup {
					return out, fmt.Errorf("rescale: customer %d is held by two tasks of %s (the second is %s)", c, totalsID, id)
				}
				out.totals[c] = customerTotals{orders: n, amount: amounts[c]}
			}
		case webID, shopID:
			for _, b := range st.GetSplits() {
				sp, err := decodeSplit(b)
				if err != nil {
					return out, fmt.Errorf("rescale: task %s: %w", id, err)
				}
				out.produced += sp.emitted
			}
		}
	}
	return out, nil
}

// counted is the number of orders that totals has counted.
func (s stored) counted() int64 {
	var n int64
	for _, t := range s.totals {
		n += t.orders
	}
	return n
}

// amount is the sum of every customer's amount.
func (s stored) amount() int64 {
	var a int64
	for _, t := range s.totals {
		a += t.amount
	}
	return a
}

// maxDiffs bounds the differences that diff lists.
const maxDiffs = 10

// diff describes how got differs from want, customer by customer (at most
// maxDiffs lines, then how many more), or returns nil when they are equal.
func diff(got, want map[int64]customerTotals) []string {
	keys := make([]int64, 0, len(want))
	for c := range want {
		keys = append(keys, c)
	}
	for c := range got {
		if _, ok := want[c]; !ok {
			keys = append(keys, c)
		}
	}
	slices.Sort(keys)
	var out []string
	n := 0
	for _, c := range keys {
		g, w := got[c], want[c]
		if g == w {
			continue
		}
		if n++; n <= maxDiffs {
			out = append(out, fmt.Sprintf("customer %d: %d orders, %d cents; the closed form says %d orders, %d cents",
				c, g.orders, g.amount, w.orders, w.amount))
		}
	}
	if n > maxDiffs {
		out = append(out, fmt.Sprintf("... and %d more customers", n-maxDiffs))
	}
	return out
}
