package nexmark

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Kind says which entity an event carries.
type Kind uint8

// The kinds of event.
const (
	PersonEvent  Kind = iota + 1 // a new user
	AuctionEvent                 // an item for sale
	BidEvent                     // a bid on an auction
)

// Person is a new user of the auction site.
type Person struct {
	ID         int64
	Name       string
	Email      string
	CreditCard string
	City       string
	State      string
	Time       int64 // event time, ns
}

// Auction is an item put up for sale.
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	Time        int64 // event time, ns
	Expires     int64 // ns
	Seller      int64
	Category    int64
}

// Bid is a bid on an auction.
type Bid struct {
	Auction int64
	Bidder  int64
	Price   int64 // cents
	Channel string
	URL     string
	Time    int64 // event time, ns
}

// Event is one event of the stream: Bid is set for bids (92% of events),
// Person or Auction for the others.
type Event struct {
	Kind    Kind
	Bid     Bid
	Person  *Person
	Auction *Auction
}

// Time is the event's event time, ns since the Unix epoch.
func (e Event) Time() int64 {
	switch e.Kind {
	case PersonEvent:
		return e.Person.Time
	case AuctionEvent:
		return e.Auction.Time
	}
	return e.Bid.Time
}

// The model's constants (Nexmark's): out of every 50 events, 1 person, 3
// auctions and 46 bids; ids start at 1000.
const (
	proportion    = 50
	personShare   = 1
	auctionShare  = 3
	firstID       = 1000
	firstCategory = 10
	categories    = 5
	inFlight      = 100 // auctions a bid chooses among, besides the hot one
	activePeople  = 1000
	hotRatio      = 100 // hot auctions and bidders have ids that are multiples of it
)

var (
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	cities     = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	states     = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	names      []string // every first and last name
	emails     []string
	channels   []string
	urls       []string
	items      []string
)

func init() {
	for _, f := range firstNames {
		for _, l := range lastNames {
			names = append(names, f+" "+l)
			emails = append(emails, f+"."+l+"@nexmark.example")
		}
	}
	for i := range 100 {
		channels = append(channels, "channel-"+strconv.Itoa(i))
		urls = append(urls, fmt.Sprintf("https://www.nexmark.example/item.htm?query=1&channel_id=%d", i))
	}
	for i := range 200 {
		items = append(items, "item-"+strconv.Itoa(i))
	}
}

// Config is a generated stream.
type Config struct {
	// Events is how many events the stream has.
	Events int64
	// Rate is how many events fall in a second of event time (default
	// 100,000).
	Rate int64
	// Splits is how many splits the source has (default 8): split s
	// holds events s, s+Splits, s+2*Splits, ...
	Splits int
	// OutOfOrder is how far behind the newest event of its split an event
	// may come; the source's watermark strategy allows exactly this, so no
	// event is late. 0: in order.
	OutOfOrder time.Duration
	// Seed chooses the events' fields.
	Seed uint64
	// Base is the event time of event 0, ns (default: 2026-01-01 UTC).
	Base int64
	// Pace, when positive, limits each source task to this many events
	// per second of the clock (for soaks: failures then strike mid-run).
	Pace float64
	// Gate, when set, stops each split at a limit until the job is
	// stopped: a phase of a soak that ends with a savepoint.
	Gate Gate
}

// Gate stops a source's splits part way (see Config.Gate).
type Gate interface {
	// Limit is how many of its length events split s reads.
	Limit(s int, length int64) int64
	// Reached says that split s has read up to its limit.
	Reached(s int)
}

// DefaultBase is Config.Base's default.
var DefaultBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func (c Config) withDefaults() Config {
	if c.Rate == 0 {
		c.Rate = 100_000
	}
	if c.Splits == 0 {
		c.Splits = 8
	}
	if c.Base == 0 {
		c.Base = DefaultBase
	}
	return c
}

// Validate refuses a stream the generator cannot make.
func (c Config) Validate() error {
	switch {
	case c.Events < 0:
		return fmt.Errorf("nexmark: %d events", c.Events)
	case c.Rate < 0 || c.Rate > int64(time.Second):
		return fmt.Errorf("nexmark: rate %d events/s: want 1 to 1e9", c.Rate)
	case c.Splits < 0:
		return fmt.Errorf("nexmark: %d splits", c.Splits)
	case c.OutOfOrder < 0:
		return fmt.Errorf("nexmark: out-of-orderness %v is negative", c.OutOfOrder)
	}
	return nil
}

// interval is the event time between consecutive events, ns.
func (c Config) interval() int64 { return int64(time.Second) / c.Rate }

// rnd is a splitmix64 stream seeded by the seed and the event number.
type rnd struct{ s uint64 }

func newRnd(seed uint64, n int64) rnd { return rnd{seed ^ (uint64(n)+1)*0x9e3779b97f4a7c15} }

func (r *rnd) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rnd) intn(n int64) int64 { return int64(r.next() % uint64(n)) }

// lastPerson and lastAuction are the highest ids made by event n or before.
func lastPerson(n int64) int64 { return firstID + n/proportion }

func lastAuction(n int64) int64 {
	epoch, off := n/proportion, n%proportion
	if off < personShare {
		return firstID + epoch*auctionShare - 1
	}
	return firstID + epoch*auctionShare + min(off-personShare, auctionShare-1)
}

// Event returns event n of the stream: a pure function of the seed and n.
func (c Config) Event(n int64) Event {
	c = c.withDefaults()
	return c.event(n)
}

func (c Config) event(n int64) Event {
	r := newRnd(c.Seed, n)
	t := c.Base + n*c.interval()
	epoch, off := n/proportion, n%proportion
	switch {
	case off < personShare:
		k := r.intn(int64(len(names)))
		p := &Person{ID: firstID + epoch, Name: names[k], Email: emails[k],
			CreditCard: strconv.FormatInt(1000_0000_0000_0000+r.intn(9000_0000_0000_0000), 10),
			City:       cities[r.intn(int64(len(cities)))], State: states[r.intn(int64(len(states)))], Time: t}
		return Event{Kind: PersonEvent, Person: p}
	case off < personShare+auctionShare:
		seller := lastPerson(n)
		if r.intn(2) == 0 { // a person who just joined
			seller -= r.intn(min(20, seller-firstID+1))
		} else {
			seller -= r.intn(min(activePeople, seller-firstID+1))
		}
		initial := 100 + r.intn(10_000)
		a := &Auction{ID: firstID + epoch*auctionShare + off - personShare, ItemName: items[r.intn(int64(len(items)))],
			Description: "lot " + strconv.FormatInt(n, 10), InitialBid: initial, Reserve: initial + r.intn(10_000),
			Time: t, Expires: t + (1+r.intn(2000))*c.interval(), Seller: seller, Category: firstCategory + r.intn(categories)}
		return Event{Kind: AuctionEvent, Auction: a}
	}
	auction := lastAuction(n)
	if r.intn(2) == 0 { // the hot auction
		auction = max(firstID, auction/hotRatio*hotRatio)
	} else {
		auction -= r.intn(min(inFlight, auction-firstID+1))
	}
	bidder := lastPerson(n)
	if r.intn(4) > 0 { // a hot bidder
		bidder = max(firstID, bidder/hotRatio*hotRatio)
	} else {
		bidder -= r.intn(min(activePeople, bidder-firstID+1))
	}
	ch := r.intn(int64(len(channels)))
	price := int64(math.Round(math.Pow(10, float64(r.next()>>11)/(1<<53)*6) * 100))
	return Event{Kind: BidEvent, Bid: Bid{Auction: auction, Bidder: bidder, Price: price, Channel: channels[ch], URL: urls[ch], Time: t}}
}
