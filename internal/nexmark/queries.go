package nexmark

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/window"
)

// Params are the queries' settings.
type Params struct {
	// Parallelism of every operator but the source (default 1).
	Parallelism int
	// Window is q5's window size and q7's and q8's tumbling window
	// (default 10s), Slide q5's slide (default 2s), Gap q11's session gap
	// (default 10s).
	Window, Slide, Gap time.Duration
}

func (p Params) withDefaults() Params {
	if p.Parallelism == 0 {
		p.Parallelism = 1
	}
	if p.Window == 0 {
		p.Window = 10 * time.Second
	}
	if p.Slide == 0 {
		p.Slide = 2 * time.Second
	}
	if p.Gap == 0 {
		p.Gap = 10 * time.Second
	}
	return p
}

// Output is a query's result stream, to attach a sink to.
type Output struct {
	// Lines formats each row with its String method.
	Lines func() topology.Stream[string]
	// Discard attaches a sink that counts the rows.
	Discard func(name string, rows func(n int))
}

func outputOf[R fmt.Stringer](s topology.Stream[R], p Params) Output {
	return Output{
		Lines: func() topology.Stream[string] { return topology.Map(s, "format", R.String, par(p)) },
		Discard: func(name string, rows func(int)) {
			topology.Sink(s, name, func(R) error { rows(1); return nil }, par(p))
		},
	}
}

// Query is one of the standard queries.
type Query struct {
	Name, About string
	// Build adds the query to the graph of events.
	Build func(events topology.Stream[Event], p Params) Output
	plain func(c Config, p Params, emit func(fmt.Stringer))
}

// Plain runs the query as a plain single-goroutine loop over the events in
// order, calling emit with each row: the reference the runtime's output
// must equal, and the practical limit of its speed.
func (q Query) Plain(c Config, p Params, emit func(fmt.Stringer)) {
	q.plain(c.withDefaults(), p.withDefaults(), emit)
}

// Reference is the query's rows over the stream c, formatted and sorted.
func (q Query) Reference(c Config, p Params) []string {
	var rows []string
	q.Plain(c, p, func(r fmt.Stringer) { rows = append(rows, r.String()) })
	slices.Sort(rows)
	return rows
}

// Queries are the queries, in Nexmark's numbering.
var Queries = []Query{
	{"q0", "pass-through: every bid", q0, plainQ0},
	{"q1", "currency conversion: bid prices in euros", q1, plainQ1},
	{"q2", "selection: the bids on every 123rd auction", q2, plainQ2},
	{"q3", "local item suggestion: category 10 auctions of sellers in OR, ID or CA (incremental join)", q3, plainQ3},
	{"q4", "average closing price per category, updated as each auction closes", q4, plainQ4},
	{"q5", "hot items: the auctions with the most bids per sliding window", q5, plainQ5},
	{"q7", "highest bid per tumbling window", q7, plainQ7},
	{"q8", "new users who opened an auction in the tumbling window they joined in", q8, plainQ8},
	{"q11", "user sessions: bids per bidder session", q11, plainQ11},
}

// QueryNamed returns the query called name.
func QueryNamed(name string) (Query, bool) {
	for _, q := range Queries {
		if q.Name == name {
			return q, true
		}
	}
	return Query{}, false
}

func par(p Params) topology.Option { return topology.Parallelism(p.Parallelism) }

func bidsOf(events topology.Stream[Event], p Params) topology.Stream[Bid] {
	return topology.FlatMap(events, "bids", func(e Event, out *topology.Collector[Bid]) error {
		if e.Kind == BidEvent {
			out.Emit(e.Bid)
		}
		return nil
	}, par(p))
}

func personsOf(events topology.Stream[Event], p Params) topology.Stream[Person] {
	return topology.FlatMap(events, "persons", func(e Event, out *topology.Collector[Person]) error {
		if e.Kind == PersonEvent {
			out.Emit(*e.Person)
		}
		return nil
	}, par(p))
}

func auctionsOf(events topology.Stream[Event], p Params) topology.Stream[Auction] {
	return topology.FlatMap(events, "auctions", func(e Event, out *topology.Collector[Auction]) error {
		if e.Kind == AuctionEvent {
			out.Emit(*e.Auction)
		}
		return nil
	}, par(p))
}

// String is the row as the check compares it.
func (b Bid) String() string {
	return fmt.Sprintf("%d %d %d %s %d", b.Auction, b.Bidder, b.Price, b.Channel, b.Time)
}

// q0 passes every bid through.
func q0(events topology.Stream[Event], p Params) Output {
	p = p.withDefaults()
	return outputOf(bidsOf(events, p), p)
}

func plainQ0(c Config, _ Params, emit func(fmt.Stringer)) {
	for n := range c.Events {
		if e := c.event(n); e.Kind == BidEvent {
			emit(e.Bid)
		}
	}
}

// toEuro is q1's exchange rate, in thousandths.
func toEuro(cents int64) int64 { return cents * 908 / 1000 }

// q1 converts bid prices to euros.
func q1(events topology.Stream[Event], p Params) Output {
	p = p.withDefaults()
	return outputOf(topology.Map(bidsOf(events, p), "euros", func(b Bid) Bid { b.Price = toEuro(b.Price); return b }, par(p)), p)
}

func plainQ1(c Config, _ Params, emit func(fmt.Stringer)) {
	for n := range c.Events {
		if e := c.event(n); e.Kind == BidEvent {
			e.Bid.Price = toEuro(e.Bid.Price)
			emit(e.Bid)
		}
	}
}

// Q2Row is a bid of q2.
type Q2Row struct{ Auction, Price int64 }

// String is the row as the check compares it.
func (r Q2Row) String() string { return fmt.Sprintf("%d %d", r.Auction, r.Price) }

// q2 selects the bids on auctions whose id is a multiple of 123.
func q2(events topology.Stream[Event], p Params) Output {
	p = p.withDefaults()
	return outputOf(topology.FlatMap(events, "select", func(e Event, out *topology.Collector[Q2Row]) error {
		if e.Kind == BidEvent && e.Bid.Auction%123 == 0 {
			out.Emit(Q2Row{e.Bid.Auction, e.Bid.Price})
		}
		return nil
	}, par(p)), p)
}

func plainQ2(c Config, _ Params, emit func(fmt.Stringer)) {
	for n := range c.Events {
		if e := c.event(n); e.Kind == BidEvent && e.Bid.Auction%123 == 0 {
			emit(Q2Row{e.Bid.Auction, e.Bid.Price})
		}
	}
}

// Q3Row is an auction of q3 with its seller.
type Q3Row struct {
	Name, City, State string
	Auction           int64
}

// String is the row as the check compares it.
func (r Q3Row) String() string { return fmt.Sprintf("%s|%s|%s|%d", r.Name, r.City, r.State, r.Auction) }

func q3State(s string) bool { return s == "OR" || s == "ID" || s == "CA" }

// seller is what q3's reference keeps of a person.
type seller struct{ Name, City, State string }

// q3 joins category-10 auctions with their sellers in OR, ID or CA: an
// incremental join that keeps every person, and the auctions that came
// before their seller.
func q3(events topology.Stream[Event], p Params) Output {
	p = p.withDefaults()
	auctions := topology.Filter(auctionsOf(events, p), "category-10", func(a Auction) bool { return a.Category == 10 }, par(p))
	persons := personsOf(events, p)
	joined := topology.CoProcess(
		topology.KeyBy(persons, func(x Person) int64 { return x.ID }),
		topology.KeyBy(auctions, func(a Auction) int64 { return a.Seller }), "join",
		func(s *topology.KeyedSetup[int64]) topology.CoProcessFunc[int64, Person, Auction, Q3Row] {
			// A person is kept as "name|city|state" when they live in
			// one of the query's states and as "" otherwise: strings are
			// stored without JSON, and most persons need nothing more.
			person := topology.Value[string](s, "person")
			pending := topology.Value[[]int64](s, "pending-auctions")
			return topology.CoProcessFunc[int64, Person, Auction, Q3Row]{
				First: func(_ *topology.Context[int64], x Person, out *topology.Collector[Q3Row]) error {
					if !q3State(x.State) {
						person.Set("")
						pending.Clear()
						return nil
					}
					person.Set(x.Name + "|" + x.City + "|" + x.State)
					if ids, ok := pending.Get(); ok {
						for _, id := range ids {
							out.Emit(Q3Row{x.Name, x.City, x.State, id})
						}
						pending.Clear()
					}
					return nil
				},
				Second: func(_ *topology.Context[int64], a Auction, out *topology.Collector[Q3Row]) error {
					if x, ok := person.Get(); ok {
						if x != "" {
							name, rest, _ := strings.Cut(x, "|")
							city, state, _ := strings.Cut(rest, "|")
							out.Emit(Q3Row{name, city, state, a.ID})
						}
						return nil
					}
					ids, _ := pending.Get()
					pending.Set(append(ids, a.ID))
					return nil
				},
			}
		}, par(p))
	return outputOf(joined, p)
}

func plainQ3(c Config, _ Params, emit func(fmt.Stringer)) {
	persons := map[int64]seller{}
	pending := map[int64][]int64{}
	for n := range c.Events {
		switch e := c.event(n); e.Kind {
		case PersonEvent:
			x := e.Person
			persons[x.ID] = seller{x.Name, x.City, x.State}
			for _, id := range pending[x.ID] {
				if q3State(x.State) {
					emit(Q3Row{x.Name, x.City, x.State, id})
				}
			}
			delete(pending, x.ID)
		case AuctionEvent:
			if e.Auction.Category != 10 {
				continue
			}
			if x, ok := persons[e.Auction.Seller]; ok {
				if q3State(x.State) {
					emit(Q3Row{x.Name, x.City, x.State, e.Auction.ID})
				}
				continue
			}
			pending[e.Auction.Seller] = append(pending[e.Auction.Seller], e.Auction.ID)
		}
	}
}

// Q4Row is an auction that closed with a winning bid, and its category's
// average closing price so far: Sum/Count over the category's closed
// auctions up to this one, in (close time, auction) order.
type Q4Row struct {
	Category, Auction, Final int64
	Count, Sum               int64
}

// String is the row as the check compares it.
func (r Q4Row) String() string {
	return fmt.Sprintf("%d %d %d %d %.3f", r.Category, r.Auction, r.Final, r.Count, float64(r.Sum)/float64(r.Count))
}

// closing is an auction's winning price, as q4's first stage emits it at
// the auction's expiry.
type closing struct {
	Category, Auction, Final, At int64
}

// auctionInfo is what q4 keeps of an open auction.
type auctionInfo struct {
	Category, Start, Expires int64
}

// early is a bid that came before its auction.
type early struct{ Price, At int64 }

// q4Auction is what q4 keeps of an auction: the auction once it has come,
// its best valid bid, and the bids that came before it.
type q4Auction struct {
	Info    auctionInfo
	Known   bool
	Best    int64
	HasBest bool
	Early   []early
}

// bid folds a bid in, and reports whether it changed the best.
func (a *q4Auction) bid(price, at int64) bool {
	if at < a.Info.Start || at > a.Info.Expires || (a.HasBest && price <= a.Best) {
		return false
	}
	a.Best, a.HasBest = price, true
	return true
}

// q4 closes each auction at its expiry (event time) with its highest
// valid bid, then keeps a running average of closing prices per category.
func q4(events topology.Stream[Event], p Params) Output {
	p = p.withDefaults()
	closed := topology.CoProcess(
		topology.KeyBy(auctionsOf(events, p), func(a Auction) int64 { return a.ID }),
		topology.KeyBy(bidsOf(events, p), func(b Bid) int64 { return b.Auction }), "winning-bids",
		func(s *topology.KeyedSetup[int64]) topology.CoProcessFunc[int64, Auction, Bid, closing] {
			state := topology.Value[q4Auction](s, "auction")
			topology.OnTimer(s, func(ctx *topology.Context[int64], t topology.Timer, out *topology.Collector[closing]) error {
				a, _ := state.Get()
				switch {
				case !a.Known: // bids of an auction closed before them
					state.Clear()
				case t.Time.UnixNano() == a.Info.Expires:
					if a.HasBest {
						out.Emit(closing{a.Info.Category, ctx.Key(), a.Best, a.Info.Expires})
					}
					state.Clear()
				}
				return nil
			})
			return topology.CoProcessFunc[int64, Auction, Bid, closing]{
				First: func(ctx *topology.Context[int64], x Auction, _ *topology.Collector[closing]) error {
					a, _ := state.Get()
					a.Info, a.Known = auctionInfo{x.Category, x.Time, x.Expires}, true
					for _, e := range a.Early {
						a.bid(e.Price, e.At)
					}
					a.Early = nil
					state.Set(a)
					ctx.RegisterEventTimer(time.Unix(0, x.Expires))
					return nil
				},
				Second: func(ctx *topology.Context[int64], b Bid, _ *topology.Collector[closing]) error {
					a, _ := state.Get()
					if a.Known {
						if a.bid(b.Price, b.Time) {
							state.Set(a)
						}
						return nil
					}
					// The auction is yet to come, or closed: once the
					// watermark passes the bid, it has come.
					a.Early = append(a.Early, early{b.Price, b.Time})
					state.Set(a)
					ctx.RegisterEventTimer(time.Unix(0, b.Time))
					return nil
				},
			}
		}, par(p))
	averages := topology.Process(topology.KeyBy(closed, func(c closing) int64 { return c.Category }), "category-average",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, closing, Q4Row] {
			// The closings waiting for the watermark, by close time:
			// each close time's timer takes its own.
			waiting := topology.MapOf[int64, []closing](s, "closing")
			count := topology.Value[int64](s, "count")
			sum := topology.Value[int64](s, "sum")
			topology.OnTimer(s, func(ctx *topology.Context[int64], t topology.Timer, out *topology.Collector[Q4Row]) error {
				at := t.Time.UnixNano()
				now, _ := waiting.Get(at)
				waiting.Delete(at)
				slices.SortFunc(now, cmpClosing)
				n, total := getOr(count), getOr(sum)
				for _, c := range now {
					n, total = n+1, total+c.Final
					out.Emit(Q4Row{ctx.Key(), c.Auction, c.Final, n, total})
				}
				count.Set(n)
				sum.Set(total)
				return nil
			})
			return func(ctx *topology.Context[int64], c closing, _ *topology.Collector[Q4Row]) error {
				cs, _ := waiting.Get(c.At)
				waiting.Put(c.At, append(cs, c))
				ctx.RegisterEventTimer(time.Unix(0, c.At))
				return nil
			}
		}, par(p))
	return outputOf(averages, p)
}

func getOr(v *topology.ValueState[int64, int64]) int64 { x, _ := v.Get(); return x }

func cmpClosing(a, b closing) int {
	if a.At != b.At {
		if a.At < b.At {
			return -1
		}
		return 1
	}
	switch {
	case a.Auction < b.Auction:
		return -1
	case a.Auction > b.Auction:
		return 1
	}
	return 0
}

func plainQ4(c Config, _ Params, emit func(fmt.Stringer)) {
	open := map[int64]auctionInfo{}
	best := map[int64]int64{}
	var closings []closing
	for n := range c.Events {
		switch e := c.event(n); e.Kind {
		case AuctionEvent:
			open[e.Auction.ID] = auctionInfo{e.Auction.Category, e.Auction.Time, e.Auction.Expires}
		case BidEvent:
			b := e.Bid
			// Auctions come before their bids in the stream's order.
			if a, ok := open[b.Auction]; ok && b.Time >= a.Start && b.Time <= a.Expires {
				if x, ok := best[b.Auction]; !ok || b.Price > x {
					best[b.Auction] = b.Price
				}
			}
		}
	}
	for id, price := range best {
		closings = append(closings, closing{open[id].Category, id, price, open[id].Expires})
	}
	slices.SortFunc(closings, cmpClosing)
	count, sum := map[int64]int64{}, map[int64]int64{}
	for _, x := range closings {
		count[x.Category]++
		sum[x.Category] += x.Final
		emit(Q4Row{x.Category, x.Auction, x.Final, count[x.Category], sum[x.Category]})
	}
}

// Q5Row is a hot auction of a window: one with the most bids.
type Q5Row struct{ WindowEnd, Auction, Bids int64 }

// String is the row as the check compares it.
func (r Q5Row) String() string { return fmt.Sprintf("%d %d %d", r.WindowEnd, r.Auction, r.Bids) }

// hot is q5's running maximum of one window.
type hot struct {
	Max      int64
	Auctions []int64
}

// q5 counts each auction's bids per sliding window, then keeps, per
// window, the auctions with the most.
func q5(events topology.Stream[Event], p Params) Output {
	p = p.withDefaults()
	bids := topology.KeyBy(bidsOf(events, p), func(b Bid) int64 { return b.Auction })
	counts := window.Count(window.Of(bids, window.Sliding(p.Window, p.Slide)), "bids-per-auction", par(p))
	top := topology.Process(topology.KeyBy(counts, func(r window.Result[int64, int64]) int64 { return r.Window.End.UnixNano() }), "hottest",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, window.Result[int64, int64], Q5Row] {
			best := topology.Value[hot](s, "hottest")
			topology.OnTimer(s, func(ctx *topology.Context[int64], _ topology.Timer, out *topology.Collector[Q5Row]) error {
				h, _ := best.Get()
				for _, a := range h.Auctions {
					out.Emit(Q5Row{ctx.Key(), a, h.Max})
				}
				best.Clear()
				return nil
			})
			return func(ctx *topology.Context[int64], r window.Result[int64, int64], _ *topology.Collector[Q5Row]) error {
				h, ok := best.Get()
				switch {
				case !ok || r.Value > h.Max:
					h = hot{Max: r.Value, Auctions: []int64{r.Key}}
				case r.Value == h.Max:
					h.Auctions = append(h.Auctions, r.Key)
				default:
					return nil
				}
				best.Set(h)
				ctx.RegisterEventTimer(r.Window.MaxTimestamp())
				return nil
			}
		}, par(p))
	return outputOf(top, p)
}

func plainQ5(c Config, p Params, emit func(fmt.Stringer)) {
	size, slide := int64(p.Window), int64(p.Slide)
	type key struct{ end, auction int64 }
	counts := map[key]int64{}
	for n := range c.Events {
		if e := c.event(n); e.Kind == BidEvent {
			t := e.Bid.Time
			for end := t - floorMod(t, slide) + slide; end <= t+size; end += slide {
				counts[key{end, e.Bid.Auction}]++
			}
		}
	}
	best := map[int64]int64{}
	for k, n := range counts {
		best[k.end] = max(best[k.end], n)
	}
	for k, n := range counts {
		if n == best[k.end] {
			emit(Q5Row{k.end, k.auction, n})
		}
	}
}

func floorMod(t, m int64) int64 {
	r := t % m
	if r < 0 {
		r += m
	}
	return r
}

// Q7Row is a bid with the highest price of its tumbling window.
type Q7Row struct {
	WindowEnd                    int64
	Auction, Bidder, Price, Time int64
}

// String is the row as the check compares it.
func (r Q7Row) String() string {
	return fmt.Sprintf("%d %d %d %d %d", r.WindowEnd, r.Auction, r.Bidder, r.Price, r.Time)
}

// highest is q7's accumulator: the highest price and its bids.
type highest struct {
	Price int64
	Bids  []Bid
}

func (h highest) add(b Bid) highest {
	switch {
	case len(h.Bids) == 0 || b.Price > h.Price:
		return highest{b.Price, append(h.Bids[:0], b)} // add may change h
	case b.Price == h.Price:
		h.Bids = append(h.Bids, b)
	}
	return h
}

func (h highest) merge(o highest) highest {
	for _, b := range o.Bids {
		h = h.add(b)
	}
	return h
}

// q7Buckets is how many partial maxima q7 computes per window.
const q7Buckets = 64

// q7 finds each tumbling window's highest bids: the highest per bucket of
// auctions first, then over buckets.
func q7(events topology.Stream[Event], p Params) Output {
	p = p.withDefaults()
	// The first stage spreads bids over a fixed number of buckets: enough
	// to share the work among tasks, few enough that each bucket sees
	// many bids per window and sends one partial result per window.
	bids := topology.KeyBy(bidsOf(events, p), func(b Bid) int64 { return b.Auction % q7Buckets })
	perAuction := window.Aggregate(window.Of(bids, window.Tumbling(p.Window)), "highest-per-bucket",
		window.Aggregator[Bid, highest, highest]{Add: highest.add, Merge: highest.merge}, par(p))
	top := topology.Process(topology.KeyBy(perAuction, func(r window.Result[int64, highest]) int64 { return r.Window.End.UnixNano() }), "highest",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, window.Result[int64, highest], Q7Row] {
			best := topology.Value[highest](s, "highest")
			topology.OnTimer(s, func(ctx *topology.Context[int64], _ topology.Timer, out *topology.Collector[Q7Row]) error {
				h, _ := best.Get()
				for _, b := range h.Bids {
					out.Emit(Q7Row{ctx.Key(), b.Auction, b.Bidder, b.Price, b.Time})
				}
				best.Clear()
				return nil
			})
			return func(ctx *topology.Context[int64], r window.Result[int64, highest], _ *topology.Collector[Q7Row]) error {
				h, _ := best.Get()
				best.Set(h.merge(r.Value))
				ctx.RegisterEventTimer(r.Window.MaxTimestamp())
				return nil
			}
		}, par(p))
	return outputOf(top, p)
}

func plainQ7(c Config, p Params, emit func(fmt.Stringer)) {
	size := int64(p.Window)
	best := map[int64]highest{}
	for n := range c.Events {
		if e := c.event(n); e.Kind == BidEvent {
			end := e.Bid.Time - floorMod(e.Bid.Time, size) + size
			best[end] = best[end].add(e.Bid)
		}
	}
	for end, h := range best {
		for _, b := range h.Bids {
			emit(Q7Row{end, b.Auction, b.Bidder, b.Price, b.Time})
		}
	}
}

// Q8Row is a person who opened an auction in the window they joined in.
type Q8Row struct {
	Person      int64
	Name        string
	WindowStart int64
}

// String is the row as the check compares it.
func (r Q8Row) String() string { return fmt.Sprintf("%d %s %d", r.Person, r.Name, r.WindowStart) }

// q8In is a person or an auction, by the person's id.
type q8In struct {
	ID     int64
	Name   string // "" for an auction
	Person bool
}

// q8 joins persons and the sellers of auctions per tumbling window.
func q8(events topology.Stream[Event], p Params) Output {
	p = p.withDefaults()
	persons := topology.Map(personsOf(events, p), "person-ids", func(x Person) q8In { return q8In{x.ID, x.Name, true} }, par(p))
	sellers := topology.Map(auctionsOf(events, p), "seller-ids", func(a Auction) q8In { return q8In{ID: a.Seller} }, par(p))
	both := topology.KeyBy(topology.Union(persons, sellers), func(x q8In) int64 { return x.ID })
	joined := window.Process(window.Of(both, window.Tumbling(p.Window)), "new-sellers",
		func(id int64, w window.Window, xs []q8In, out *topology.Collector[Q8Row]) error {
			name, person, auction := "", false, false
			for _, x := range xs {
				if x.Person {
					name, person = x.Name, true
				} else {
					auction = true
				}
			}
			if person && auction {
				out.Emit(Q8Row{id, name, w.Start.UnixNano()})
			}
			return nil
		}, nil, par(p))
	return outputOf(joined, p)
}

func plainQ8(c Config, p Params, emit func(fmt.Stringer)) {
	size := int64(p.Window)
	type key struct{ id, start int64 }
	joined := map[key]string{}
	sold := map[key]bool{}
	for n := range c.Events {
		switch e := c.event(n); e.Kind {
		case PersonEvent:
			joined[key{e.Person.ID, e.Person.Time - floorMod(e.Person.Time, size)}] = e.Person.Name
		case AuctionEvent:
			sold[key{e.Auction.Seller, e.Auction.Time - floorMod(e.Auction.Time, size)}] = true
		}
	}
	for k, name := range joined {
		if sold[k] {
			emit(Q8Row{k.id, name, k.start})
		}
	}
}

// Q11Row is a bidder's session: bids in it and its bounds.
type Q11Row struct{ Bidder, Bids, Start, End int64 }

// String is the row as the check compares it.
func (r Q11Row) String() string { return fmt.Sprintf("%d %d %d %d", r.Bidder, r.Bids, r.Start, r.End) }

// q11 counts each bidder's bids per session.
func q11(events topology.Stream[Event], p Params) Output {
	p = p.withDefaults()
	bids := topology.KeyBy(bidsOf(events, p), func(b Bid) int64 { return b.Bidder })
	sessions := window.Count(window.Of(bids, window.Sessions(p.Gap)), "sessions", par(p))
	return outputOf(topology.Map(sessions, "session-rows", func(r window.Result[int64, int64]) Q11Row {
		return Q11Row{r.Key, r.Value, r.Window.Start.UnixNano(), r.Window.End.UnixNano()}
	}, par(p)), p)
}

func plainQ11(c Config, p Params, emit func(fmt.Stringer)) {
	gap := int64(p.Gap)
	type session struct{ start, end, n int64 }
	open := map[int64]session{} // in order: a bidder's session either extends or closes
	for n := range c.Events {
		if e := c.event(n); e.Kind == BidEvent {
			b := e.Bid
			s, ok := open[b.Bidder]
			if ok && b.Time <= s.end {
				s.end, s.n = max(s.end, b.Time+gap), s.n+1
			} else {
				if ok {
					emit(Q11Row{b.Bidder, s.n, s.start, s.end})
				}
				s = session{b.Time, b.Time + gap, 1}
			}
			open[b.Bidder] = s
		}
	}
	for bidder, s := range open {
		emit(Q11Row{bidder, s.n, s.start, s.end})
	}
}
