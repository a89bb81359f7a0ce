package actors_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// order and payment are the two inputs of the join test: keyed by
// customer, each with its own index and event time.
type order struct{ Customer, I int64 }
type payment struct {
	Customer, J int64
	Cents       int64
}

// joined is what the join emits per customer and 20ms window: how many
// orders and payments met, and their sums.
type joined struct {
	Customer, End          int64
	Orders, Payments       int64
	OrderSum, PaymentCents int64
}

const (
	joinOrders    = 12000
	joinPayments  = 9000
	joinCustomers = 23
	joinWindow    = 20 * time.Millisecond
)

func orderTime(i int64) time.Time   { return etTime(i) }
func paymentTime(j int64) time.Time { return etTime(j*4/3 + 7) }

func joinJob(name string, out func(joined) error) *topology.Graph {
	g := topology.New(name)
	orders := topology.Generate(g, "orders", joinOrders, func(i int64) order { return order{i % joinCustomers, i} }, topology.Parallelism(2),
		topology.WithWatermarks(topology.WatermarkStrategy[order]{Timestamp: func(o order) time.Time { return orderTime(o.I) }, OutOfOrderness: 10 * time.Millisecond}))
	payments := topology.Generate(g, "payments", joinPayments, func(j int64) payment { return payment{j % joinCustomers, j, j * 3} },
		topology.WithWatermarks(topology.WatermarkStrategy[payment]{Timestamp: func(p payment) time.Time { return paymentTime(p.J) }, OutOfOrderness: 10 * time.Millisecond}))
	type side struct{ N, Sum int64 }
	out2 := topology.CoProcess(topology.KeyBy(orders, func(o order) int64 { return o.Customer }), topology.KeyBy(payments, func(p payment) int64 { return p.Customer }), "join",
		func(s *topology.KeyedSetup[int64]) topology.CoProcessFunc[int64, order, payment, joined] {
			os := topology.MapOf[int64, side](s, "orders")   // window end -> orders
			ps := topology.MapOf[int64, side](s, "payments") // window end -> payments
			topology.OnTimer(s, func(ctx *topology.Context[int64], tm topology.Timer, out *topology.Collector[joined]) error {
				end := tm.Time.UnixNano()
				o, _ := os.Get(end)
				p, _ := ps.Get(end)
				os.Delete(end)
				ps.Delete(end)
				out.Emit(joined{ctx.Key(), end, o.N, p.N, o.Sum, p.Sum})
				return nil
			})
			add := func(ctx *topology.Context[int64], m *topology.MapState[int64, int64, side], v int64) {
				ts, _ := ctx.Timestamp()
				end := etWindowEndOf(ts, joinWindow)
				x, _ := m.Get(end.UnixNano())
				m.Put(end.UnixNano(), side{x.N + 1, x.Sum + v})
				ctx.RegisterEventTimer(end)
			}
			return topology.CoProcessFunc[int64, order, payment, joined]{
				First: func(ctx *topology.Context[int64], o order, _ *topology.Collector[joined]) error {
					add(ctx, os, o.I)
					return nil
				},
				Second: func(ctx *topology.Context[int64], p payment, _ *topology.Collector[joined]) error {
					add(ctx, ps, p.Cents)
					return nil
				},
			}
		}, topology.Parallelism(3))
	topology.Sink(out2, "sink", out)
	return g
}

func etWindowEndOf(t time.Time, w time.Duration) time.Time { return t.Truncate(w).Add(w) }

type joinKey struct{ Customer, End int64 }

func joinReference() map[joinKey]joined {
	ref := map[joinKey]joined{}
	for i := range int64(joinOrders) {
		k := joinKey{i % joinCustomers, etWindowEndOf(orderTime(i), joinWindow).UnixNano()}
		r := ref[k]
		r.Customer, r.End = k.Customer, k.End
		r.Orders++
		r.OrderSum += i
		ref[k] = r
	}
	for j := range int64(joinPayments) {
		k := joinKey{j % joinCustomers, etWindowEndOf(paymentTime(j), joinWindow).UnixNano()}
		r := ref[k]
		r.Customer, r.End = k.Customer, k.End
		r.Payments++
		r.PaymentCents += j * 3
		ref[k] = r
	}
	return ref
}

// A two-input keyed operator joins orders and payments per customer and
// event-time window, with shared state and timers; its results equal a
// plain-Go join, with and without a failure.
func TestCoProcessJoinExact(t *testing.T) {
	ref := joinReference()
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("failure=%v", fail), func(t *testing.T) {
			var mu sync.Mutex
			got := map[joinKey]joined{}
			var wrong []string
			out := func(j joined) error {
				mu.Lock()
				defer mu.Unlock()
				k := joinKey{j.Customer, j.End}
				if j != ref[k] && len(wrong) < 5 {
					wrong = append(wrong, fmt.Sprintf("emitted %+v, want %+v", j, ref[k]))
				}
				got[k] = j
				return nil
			}
			opts := []actors.Option{actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(10 * time.Millisecond), actors.WithLogger(testLogger(t))}
			var failed atomic.Bool
			var batches atomic.Int64
			if fail {
				opts = append(opts, actorstest.WithFaults(&actorstest.Faults{Process: func(task string) {
					if task == "join#1" && batches.Add(1) == 15 && !failed.Swap(true) {
						panic("injected failure")
					}
				}}))
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := actors.Run(ctx, joinJob("join", out), opts...); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(wrong) > 0 {
				t.Fatalf("wrong results: %v", wrong)
			}
			if !maps.Equal(got, ref) {
				t.Fatalf("%d windows emitted, want %d", len(got), len(ref))
			}
			if fail && !failed.Load() {
				t.Fatal("the failure was never injected")
			}
		})
	}
}

func TestCoProcessRefusesKeyByHash(t *testing.T) {
	g := topology.New("cop-hash")
	a := topology.Sequence(g, "a", 1, 10)
	b := topology.Sequence(g, "b", 1, 10)
	j := topology.CoProcess(topology.KeyByHash(a, func(v int64) int64 { return v }, func(k int64) uint64 { return uint64(k) }),
		topology.KeyBy(b, func(v int64) int64 { return v }), "j",
		func(*topology.KeyedSetup[int64]) topology.CoProcessFunc[int64, int64, int64, int64] {
			return topology.CoProcessFunc[int64, int64, int64, int64]{
				First:  func(*topology.Context[int64], int64, *topology.Collector[int64]) error { return nil },
				Second: func(*topology.Context[int64], int64, *topology.Collector[int64]) error { return nil },
			}
		})
	topology.Sink(j, "s", func(int64) error { return nil })
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), `operator "j": CoProcess needs both inputs keyed with KeyBy`) {
		t.Fatalf("Validate = %v", err)
	}
}
