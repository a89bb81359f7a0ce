package dataflow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/snapflow/snapflow/messages"
)

// Record types of the wire tests.
type (
	wirePair struct{ A, B int64 }
	// wireFlat has every shape of the binary layout, and ends with a
	// number so that its strings all carry their length.
	wireFlat struct {
		Key    uint64
		On     bool
		Small  int8
		Mid    int16
		F32    float32
		Name   string
		Raw    []byte
		Tags   []string
		Pairs  []wirePair
		Grid   [2][3]uint16
		Inner  CdInner
		Lvl    level
		Nm     name
		Words  [2]string
		Nested [][]byte
		I      int
		U      uint
		P      uintptr
		F64    float64
	}
	// wireRecord is the benchmark workload's record: numbers and a string.
	wireRecord struct {
		Key uint64
		TS  int64
		Pad string
	}
	wireSmall struct {
		On   bool
		Name string
		Raw  []byte
		N    int32
	}
	wireSlices struct {
		P []wirePair
		X int8
	}
	wireBlank struct {
		A int8
		_ int32 // holds no data: not encoded
		B string
	}
	wireRecursive []wireRecursive
	wireEmpties   struct{ E []struct{} }
	// poolIn and poolOut have pools of their own: no other test uses them.
	poolIn  struct{ N int64 }
	poolOut struct {
		N int64
		S string
	}
)

// wireCodec returns the codec of the one channel of a job whose source
// emits records of type T to a sink, the stream going through wrap.
func wireCodec[T any](t testing.TB, wrap func(Stream[T]) Stream[T]) BatchCodec {
	t.Helper()
	g := New("wire")
	s := FromSlice[T](g, "src", nil)
	if wrap != nil {
		s = wrap(s)
	}
	Sink(s, "sink", discard[T])
	return mustPlan(t, g).ChannelCodec(0)
}

// encode encodes a copy of vs with c into a new RecordBatch.
func encode[T any](t testing.TB, c BatchCodec, vs []T) *messages.RecordBatch {
	t.Helper()
	rb := &messages.RecordBatch{}
	if err := c.Encode(slices.Clone(vs), rb); err != nil {
		t.Fatalf("Encode(%T): %v", vs, err)
	}
	return rb
}

// decode decodes rb with c, as a []T.
func decode[T any](t testing.TB, c BatchCodec, rb *messages.RecordBatch) []T {
	t.Helper()
	v, err := c.Decode(rb)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	b, ok := v.([]T)
	if !ok {
		t.Fatalf("Decode returned %T, want %T", v, b)
	}
	return b
}

// batchRoundTrip checks that vs cross the wire unchanged, that Encode
// cleared the batch it was given, and that encoding what was decoded gives
// the same bytes.
func batchRoundTrip[T any](t *testing.T, c BatchCodec, vs []T) {
	t.Helper()
	batch := slices.Clone(vs)
	rb := &messages.RecordBatch{}
	if err := c.Encode(batch, rb); err != nil {
		t.Fatalf("%T: Encode: %v", vs, err)
	}
	for i := range batch {
		if !reflect.ValueOf(&batch[i]).Elem().IsZero() {
			t.Fatalf("%T: record %d of the encoded batch was not cleared", vs, i)
		}
	}
	if rb.Len() != len(vs) {
		t.Fatalf("%T: %d records encoded, want %d", vs, rb.Len(), len(vs))
	}
	got := decode[T](t, c, rb)
	if !reflect.DeepEqual(got, vs) {
		t.Fatalf("%T: decoded\n%#v\nwant\n%#v", vs, got, vs)
	}
	again := encode(t, c, got)
	if !bytes.Equal(again.Data, rb.Data) || !slices.Equal(again.Ends, rb.Ends) {
		t.Fatalf("%T: encoding the decoded records gives other bytes", vs)
	}
}

// randRecords returns n random values of T, an accepted type.
func randRecords[T any](r *rand.Rand, n int) []T {
	vs := make([]T, n)
	for i := range vs {
		vs[i] = randValue(r, reflect.TypeFor[T](), 0).Interface().(T)
	}
	return vs
}

// wireProp round-trips random batches of T through the default codec, and
// checks which encoding it uses: "packed", "flat" or "json".
func wireProp[T any](t *testing.T, r *rand.Rand, encoding string) {
	t.Helper()
	c := wireCodec[T](t, nil)
	bc := c.(*batchCodec[T])
	got := "json"
	switch {
	case bc.layout != nil && bc.layout.packed:
		got = "packed"
	case bc.layout != nil:
		got = "flat"
	}
	if littleEndian && got != encoding || !littleEndian && got == "json" != (encoding == "json") {
		t.Errorf("%s: encoded %s, want %s", reflect.TypeFor[T](), got, encoding)
	}
	for _, n := range []int{0, 1, 7, 100} {
		batchRoundTrip(t, c, randRecords[T](r, n))
	}
}

// TestWireDefaultRoundTrip sends random batches of every type the default
// codec accepts through a channel's codec: they decode equal, from the
// binary layout for flat types and from JSON for the others.
func TestWireDefaultRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	// The types of the state property test.
	wireProp[int](t, r, "packed")
	wireProp[int8](t, r, "packed")
	wireProp[uint](t, r, "packed")
	wireProp[uintptr](t, r, "packed")
	wireProp[float32](t, r, "packed")
	wireProp[float64](t, r, "packed")
	wireProp[bool](t, r, "flat")
	wireProp[string](t, r, "flat")
	wireProp[name](t, r, "flat")
	wireProp[level](t, r, "packed")
	wireProp[time.Duration](t, r, "packed")
	wireProp[time.Time](t, r, "json")
	wireProp[[]string](t, r, "flat")
	wireProp[map[string]int](t, r, "json")
	wireProp[map[int64][]byte](t, r, "json")
	wireProp[*int64](t, r, "json")
	wireProp[[3]int32](t, r, "packed")
	wireProp[map[cdTextKey]string](t, r, "json")
	wireProp[point](t, r, "flat")
	wireProp[cdRecursive](t, r, "json")
	wireProp[propStruct](t, r, "json")
	wireProp[[]propStruct](t, r, "json")
	// Flat types.
	wireProp[int64](t, r, "packed")
	wireProp[wirePair](t, r, "packed")
	wireProp[cdTextKey](t, r, "packed") // its MarshalText is for JSON; the binary layout is exact
	wireProp[[]byte](t, r, "flat")
	wireProp[wireRecord](t, r, "flat")
	wireProp[wireFlat](t, r, "flat")
	wireProp[[]wirePair](t, r, "flat")
	wireProp[wireEmpties](t, r, "json")
	wireProp[wireRecursive](t, r, "json")
}

// TestWireFlatExact checks values that the binary layout keeps and JSON
// would not: NaN, invalid UTF-8, the extremes of integers; and nil against
// empty slices.
func TestWireFlatExact(t *testing.T) {
	nan := math.Float64frombits(0x7ff8_dead_beef_0001)
	c := wireCodec[wireFlat](t, nil)
	rb := encode(t, c, []wireFlat{
		{F64: nan, Name: "\xff\xfe", Key: math.MaxUint64, I: math.MinInt, U: math.MaxUint, Small: math.MinInt8, Raw: []byte{}, Tags: []string{}},
		{Raw: nil, Tags: nil, Nested: [][]byte{nil, {}, {1}}},
	})
	got := decode[wireFlat](t, c, rb)
	if math.Float64bits(got[0].F64) != math.Float64bits(nan) {
		t.Errorf("NaN decoded as %x", math.Float64bits(got[0].F64))
	}
	got[0].F64 = 0
	want := []wireFlat{
		{Name: "\xff\xfe", Key: math.MaxUint64, I: math.MinInt, U: math.MaxUint, Small: math.MinInt8, Raw: []byte{}, Tags: []string{}},
		{Nested: [][]byte{nil, {}, {1}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%#v\nwant\n%#v", got, want)
	}
	if got[0].Raw == nil || got[0].Tags == nil || got[1].Raw != nil || got[1].Nested[0] != nil || got[1].Nested[1] == nil {
		t.Error("nil and empty slices are not told apart")
	}
}

// TestWireBlankField checks that blank fields are skipped.
func TestWireBlankField(t *testing.T) {
	c := wireCodec[wireBlank](t, nil)
	rb := encode(t, c, []wireBlank{{A: 1, B: "b"}, {A: -1}})
	if string(rb.Data) != "\x01b\xff" || !slices.Equal(rb.Ends, []uint32{2, 3}) {
		t.Errorf("encoded %q %v, want \"\\x01b\\xff\" [2 3]", rb.Data, rb.Ends)
	}
	if got := decode[wireBlank](t, c, rb); !reflect.DeepEqual(got, []wireBlank{{A: 1, B: "b"}, {A: -1}}) {
		t.Errorf("decoded %+v", got)
	}
}

// TestWireStringLayout pins the layout of a string record: its bytes, the
// record's end bounding them.
func TestWireStringLayout(t *testing.T) {
	rb := encode(t, wireCodec[string](t, nil), []string{"ab", "", "c"})
	if string(rb.Data) != "abc" || !slices.Equal(rb.Ends, []uint32{2, 2, 3}) {
		t.Errorf("encoded %q ends %v, want \"abc\" ends [2 2 3]", rb.Data, rb.Ends)
	}
	rb = encode(t, wireCodec[wireRecord](t, nil), []wireRecord{{Key: 1, TS: -1, Pad: "x"}})
	want := append(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 1), math.MaxUint64), 'x')
	if !bytes.Equal(rb.Data, want) {
		t.Errorf("encoded % x, want % x", rb.Data, want)
	}
}

// TestWireLayoutPortable checks that the layout's block copies, used on
// little-endian platforms, encode as the field-by-field form that
// big-endian platforms use.
func TestWireLayoutPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check := func(typ reflect.Type) {
		merged := buildLayout(typ, map[reflect.Type]bool{})
		bySteps := &layout{size: typ.Size()}
		if !bySteps.add(typ, 0, "", map[reflect.Type]bool{}) {
			t.Fatalf("%s is not flat", typ)
		}
		for range 20 {
			v := randValue(r, typ, 0)
			p := v.Addr().UnsafePointer()
			a, b := merged.appendValue(nil, p), bySteps.appendValue(nil, p)
			if !bytes.Equal(a, b) {
				t.Fatalf("%s: block copies give % x, steps % x", typ, a, b)
			}
			back := reflect.New(typ)
			rest, err := bySteps.decodeValue(b, back.UnsafePointer())
			if err != nil || len(rest) != 0 || !reflect.DeepEqual(back.Elem().Interface(), v.Interface()) {
				t.Fatalf("%s: steps decode %v (%d bytes left, %v), want %v", typ, back.Elem(), len(rest), err, v)
			}
		}
	}
	check(reflect.TypeFor[wireFlat]())
	check(reflect.TypeFor[wirePair]())
	check(reflect.TypeFor[[4]int16]())
}

// TestWireNarrowInts checks how int, uint and uintptr travel from and to
// 32-bit platforms: in 8 bytes, refusing what does not fit.
func TestWireNarrowInts(t *testing.T) {
	ops := []wireOp{{kind: opInt32As64, path: "I"}, {kind: opUint32As64, off: 4, path: "U"}}
	l := &layout{ops: ops, size: 8}
	in := [2]int32{-5, -1} // U holds MaxUint32
	b := l.appendValue(nil, unsafe.Pointer(&in))
	want := append(binary.LittleEndian.AppendUint64(nil, math.MaxUint64-4), binary.LittleEndian.AppendUint64(nil, math.MaxUint32)...)
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	var out [2]int32
	if _, err := l.decodeValue(b, unsafe.Pointer(&out)); err != nil || out != in {
		t.Fatalf("decoded %v, %v; want %v", out, err, in)
	}
	big := binary.LittleEndian.AppendUint64(nil, 1<<40)
	if _, err := l.decodeValue(append(big, want[8:]...), unsafe.Pointer(&out)); err == nil || err.Error() != "field I: 1099511627776 does not fit in 32 bits" {
		t.Errorf("int of 2^40: %v", err)
	}
	if _, err := l.decodeValue(append(want[:8:8], big...), unsafe.Pointer(&out)); err == nil || err.Error() != "field U: 1099511627776 does not fit in 32 bits" {
		t.Errorf("uint of 2^40: %v", err)
	}
}

// counter has an unexported field, which the default wire codec refuses.
type counter struct {
	name string
	N    int64
}

// counterCodec encodes a counter as its count, then its name, and counts
// its calls.
type counterCodec struct{ encoded, decoded *int }

func (c counterCodec) Append(dst []byte, v counter) ([]byte, error) {
	*c.encoded++
	return append(binary.BigEndian.AppendUint64(dst, uint64(v.N)), v.name...), nil
}

func (c counterCodec) Decode(b []byte) (counter, error) {
	*c.decoded++
	if len(b) < 8 {
		return counter{}, fmt.Errorf("counter of %d bytes", len(b))
	}
	return counter{N: int64(binary.BigEndian.Uint64(b)), name: string(b[8:])}, nil
}

func newCounterCodec() counterCodec { return counterCodec{encoded: new(int), decoded: new(int)} }

// TestWithWireCodec gives a stream of a type the default refuses a codec:
// CheckWire accepts it, and its records go through the codec.
func TestWithWireCodec(t *testing.T) {
	cc := newCounterCodec()
	g := New("wire")
	Sink(WithWireCodec(FromSlice[counter](g, "src", nil), cc), "sink", discard[counter])
	p := mustPlan(t, g)
	if err := p.CheckWire(); err != nil {
		t.Fatalf("CheckWire: %v", err)
	}
	vs := []counter{{"a", 1}, {"", -2}, {"long name", 3}}
	rb := encode(t, p.ChannelCodec(0), vs)
	if string(rb.Data[8:9]) != "a" || binary.BigEndian.Uint64(rb.Data) != 1 {
		t.Errorf("encoded % x, not by the codec", rb.Data)
	}
	if got := decode[counter](t, p.ChannelCodec(0), rb); !slices.Equal(got, vs) {
		t.Errorf("decoded %v, want %v", got, vs)
	}
	if *cc.encoded != 3 || *cc.decoded != 3 {
		t.Errorf("the codec encoded %d and decoded %d records, want 3 and 3", *cc.encoded, *cc.decoded)
	}
	// A nil codec is a graph problem.
	g = New("wire")
	Sink(WithWireCodec[counter](FromSlice[counter](g, "src", nil), nil), "sink", discard[counter])
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), `operator "src": WithWireCodec with a nil codec`) {
		t.Errorf("Validate with a nil wire codec: %v", err)
	}
}

// TestWireUnion merges a stream with a codec and one without: each edge
// into the consumer carries its own stream's codec.
func TestWireUnion(t *testing.T) {
	cc := newCounterCodec()
	g := New("wire")
	coded := WithWireCodec(FromSlice[counter](g, "coded", nil, Parallelism(2)), cc)
	plain := FromSlice[counter](g, "plain", nil)
	Sink(Union(coded, plain), "sink", discard[counter], Parallelism(2))
	p := mustPlan(t, g)
	err := p.CheckWire()
	want := `topology: the stream from operator "plain" to operator "sink" cannot cross nodes: ` +
		`its record type github.com/snapflow/snapflow/internal/dataflow.counter: field name is unexported, and JSON skips it; ` +
		`export it or pass a codec with WithWireCodec`
	if !errors.Is(err, ErrNoWireCodec) || err.Error() != want {
		t.Fatalf("CheckWire: %v\nwant %s", err, want)
	}
	for _, ch := range p.Channels {
		from := p.Tasks[ch.From].Operator
		rb := encode(t, p.ChannelCodec(ch.ID), []counter{{N: 7}})
		if byCodec := len(rb.Data) == 8 && rb.Data[7] == 7; byCodec != (from == "coded") {
			t.Errorf("channel %d from %s: encoded % x", ch.ID, from, rb.Data)
		}
	}
	fromCoded := 0
	for _, ch := range p.Channels {
		if p.Tasks[ch.From].Operator == "coded" {
			fromCoded++
		}
	}
	if *cc.encoded != fromCoded || fromCoded == 0 {
		t.Errorf("the codec encoded %d records, want %d (one per channel of operator coded)", *cc.encoded, fromCoded)
	}
}

// TestWireKeyBy checks the codec of keyed edges: KeyBy keeps the codec
// given before it, every channel of one edge shares one codec, and a
// decoded batch is processed by the keyed operator.
func TestWireKeyBy(t *testing.T) {
	cc := newCounterCodec()
	g := New("wire", MaxParallelism(4))
	src := FromSlice(g, "src", []counter{{"a", 1}}, Parallelism(2))
	keyed := KeyBy(WithWireCodec(src, cc), func(c counter) int64 { return c.N })
	var seen []int64
	sums := Process(keyed, "sum", func(s *KeyedSetup[int64]) ProcessFunc[int64, counter, wirePair] {
		total := Value[int64](s, "total")
		return func(ctx *Context[int64], v counter, out *Collector[wirePair]) error {
			seen = append(seen, ctx.Key())
			t, _ := total.Get()
			total.Set(t + v.N)
			out.Emit(wirePair{ctx.Key(), t + v.N})
			return nil
		}
	}, Parallelism(2))
	Sink(KeyBy(sums, func(p wirePair) int64 { return p.A }).Stream, "sink", discard[wirePair], Parallelism(2))
	p := mustPlan(t, g)
	if err := p.CheckWire(); err != nil {
		t.Fatalf("CheckWire: %v", err)
	}
	codecs := map[string]BatchCodec{}
	for _, ch := range p.Channels {
		if ch.Partition != PartitionHash {
			t.Fatalf("channel %d is %s, want hash", ch.ID, ch.Partition)
		}
		op := p.Tasks[ch.From].Operator
		c := p.ChannelCodec(ch.ID)
		if prev, ok := codecs[op]; ok && prev != c {
			t.Errorf("channels from %s have different codecs", op)
		}
		codecs[op] = c
	}
	if _, ok := codecs["src"].(*batchCodec[counter]); !ok || codecs["src"] == codecs["sum"] {
		t.Fatalf("codecs %v", codecs)
	}
	if bc := codecs["sum"].(*batchCodec[wirePair]); bc.user || bc.layout == nil {
		t.Errorf("the edge from sum does not use the default binary layout")
	}
	// A batch for sum#1 (key groups 2 and 3) crosses the wire.
	var in int
	for _, id := range mustTask(t, p, "sum#1").Inputs {
		if p.Tasks[p.Channels[id].From].ID == "src#1" {
			in = p.Channels[id].ToInput
		}
	}
	rb := encode(t, codecs["src"], []counter{{"x", 2}, {"y", 3}, {"z", 2}})
	out := &fakeSender{}
	sum := mustInstance(t, p, "sum#1", 10, out)
	batch, err := codecs["src"].Decode(rb)
	if err != nil {
		t.Fatal(err)
	}
	if err := sum.ProcessBatch(in, batch, nil); err != nil {
		t.Fatal(err)
	}
	sum.Flush()
	if !slices.Equal(seen, []int64{2, 3, 2}) {
		t.Errorf("keys seen %v, want [2 3 2]", seen)
	}
	sent := records[wirePair](t, out)
	rb = encode(t, codecs["sum"], sent)
	if got := decode[wirePair](t, codecs["sum"], rb); !slices.Equal(got, []wirePair{{2, 2}, {3, 3}, {2, 4}}) {
		t.Errorf("sums %v", got)
	}
}

// TestCheckWire checks the refusals of CheckWire, each naming the
// producing and the consuming operators and the type.
func TestCheckWire(t *testing.T) {
	g := New("wire")
	Sink(FromSlice[cdCounter](g, "counts", nil), "sink", discard[cdCounter])
	anys := Map(Sequence(g, "numbers", 1, 2), "box", func(v int64) any { return v })
	Sink(anys, "anys", discard[any])
	chans := FromSlice[chan int](g, "chans", nil)
	Sink(chans, "chansink", discard[chan int])
	Sink(WithWireCodec(FromSlice[chan int](g, "coded", nil), JSONCodec[chan int]{}), "codedsink", discard[chan int])
	Sink(FromSlice[wireFlat](g, "flat", nil), "flatsink", discard[wireFlat])
	p := mustPlan(t, g)
	err := p.CheckWire()
	if !errors.Is(err, ErrNoWireCodec) {
		t.Fatalf("CheckWire: %v, want ErrNoWireCodec", err)
	}
	want := []string{
		`topology: the stream from operator "counts" to operator "sink" cannot cross nodes: ` +
			`its record type github.com/snapflow/snapflow/internal/dataflow.cdCounter: field count is unexported, and JSON skips it; ` +
			`export it or pass a codec with WithWireCodec`,
		`topology: the stream from operator "box" to operator "anys" cannot cross nodes: its record type interface {}: ` +
			`the value has interface type interface {}, whose dynamic type JSON cannot restore (numbers come back as float64, objects as maps); ` +
			`use a concrete type or pass a codec with WithWireCodec`,
		`topology: the stream from operator "chans" to operator "chansink" cannot cross nodes: its record type chan int: ` +
			`the value has type chan int, which JSON cannot encode; use another type or pass a codec with WithWireCodec`,
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Errorf("CheckWire:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A job in one process plans with any type.
	if _, err := NewPlan(g); err != nil {
		t.Errorf("NewPlan: %v", err)
	}
}

// TestEncodeAppends checks that Encode appends to a RecordBatch, its ends
// counting from the start of the data, and that a reused RecordBatch keeps
// its buffers.
func TestEncodeAppends(t *testing.T) {
	c := wireCodec[string](t, nil)
	rb := &messages.RecordBatch{}
	for _, b := range [][]string{{"ab", "c"}, {"", "def"}} {
		if err := c.Encode(b, rb); err != nil {
			t.Fatal(err)
		}
	}
	if got := decode[string](t, c, rb); !slices.Equal(got, []string{"ab", "c", "", "def"}) {
		t.Errorf("two batches appended decode as %q", got)
	}
	data, ends := unsafe.SliceData(rb.Data), unsafe.SliceData(rb.Ends)
	rb.Data, rb.Ends = rb.Data[:0], rb.Ends[:0]
	if err := c.Encode([]string{"xyz"}, rb); err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(rb.Data) != data || unsafe.SliceData(rb.Ends) != ends {
		t.Error("a reused RecordBatch got new buffers")
	}
	if got := decode[string](t, c, rb); !slices.Equal(got, []string{"xyz"}) {
		t.Errorf("reused batch decodes as %q", got)
	}
}

// TestWireDecodedBatchReleased decodes a batch for an operator of every
// kind that has inputs: its ProcessBatch takes the decoded batch and
// releases it, cleared, to the pool Decode takes batches from.
func TestWireDecodedBatchReleased(t *testing.T) {
	kinds := map[string]func(Stream[poolOut]){
		"map": func(s Stream[poolOut]) {
			Sink(Map(s, "op", func(v poolOut) int64 { return v.N }), "sink", discard[int64])
		},
		"filter": func(s Stream[poolOut]) {
			Sink(Filter(s, "op", func(poolOut) bool { return true }), "sink", discard[poolOut])
		},
		"flatmap": func(s Stream[poolOut]) {
			Sink(FlatMap(s, "op", func(poolOut, *Collector[int64]) error { return nil }), "sink", discard[int64])
		},
		"process": func(s Stream[poolOut]) {
			k := KeyBy(s, func(v poolOut) int64 { return v.N })
			Sink(Process(k, "op", func(*KeyedSetup[int64]) ProcessFunc[int64, poolOut, int64] {
				return func(*Context[int64], poolOut, *Collector[int64]) error { return nil }
			}), "sink", discard[int64])
		},
		"sink": func(s Stream[poolOut]) { Sink(s, "op", discard[poolOut]) },
	}
	for kind, build := range kinds {
		t.Run(kind, func(t *testing.T) {
			g := New("wire")
			build(FromSlice[poolOut](g, "src", nil))
			p := mustPlan(t, g)
			op := mustTask(t, p, "op#0")
			c := p.ChannelCodec(op.Inputs[0])
			inst := mustInstance(t, p, "op#0", 4, noopSender{})
			rb := encode(t, c, []poolOut{{1, "one"}, {2, "two"}})
			released := map[*poolOut]bool{}
			// sync.Pool may drop what it is given (always a quarter of it
			// under the race detector): try until a batch comes back.
			for range 200 {
				v, err := c.Decode(rb)
				if err != nil {
					t.Fatal(err)
				}
				b := v.([]poolOut)
				if released[unsafe.SliceData(b)] {
					return
				}
				if err := inst.ProcessBatch(0, v, nil); err != nil {
					t.Fatal(err)
				}
				if b[0] != (poolOut{}) || b[1] != (poolOut{}) {
					t.Fatalf("ProcessBatch did not release the decoded batch: %v", b)
				}
				released[unsafe.SliceData(b)] = true
			}
			t.Fatal("Decode never reused a batch that ProcessBatch released")
		})
	}
}

// TestWireEncodedBatchReused checks the sender's side: a batch a Collector
// sent, once encoded, is filled again by the Collector.
func TestWireEncodedBatchReused(t *testing.T) {
	g := New("wire")
	m := Map(FromSlice[poolIn](g, "src", nil), "m", func(v poolIn) poolOut { return poolOut{N: v.N, S: "s"} })
	Sink(m, "sink", discard[poolOut])
	p := mustPlan(t, g)
	c := p.ChannelCodec(mustTask(t, p, "m#0").Outputs[0])
	out := &fakeSender{}
	inst := mustInstance(t, p, "m#0", 2, out)
	encoded := map[*poolOut]bool{}
	for range 200 {
		if err := inst.ProcessBatch(0, []poolIn{{1}, {2}}, nil); err != nil {
			t.Fatal(err)
		}
		if len(out.sends) != 1 {
			t.Fatalf("%d batches sent, want 1", len(out.sends))
		}
		b := out.sends[0].batch.([]poolOut)
		out.reset()
		if encoded[unsafe.SliceData(b)] {
			return
		}
		encoded[unsafe.SliceData(b)] = true
		if err := c.Encode(b, &messages.RecordBatch{}); err != nil {
			t.Fatal(err)
		}
		if b[0] != (poolOut{}) {
			t.Fatal("Encode did not clear the batch it released")
		}
	}
	t.Fatal("the Collector never reused a batch that Encode released")
}

// TestWireAllocations checks the hot path: encoding a batch of numbers or
// strings allocates nothing once the RecordBatch has grown, and decoding
// allocates per batch, plus one string per record with a string.
func TestWireAllocations(t *testing.T) {
	const n = 256
	t.Run("int64", func(t *testing.T) { wireAllocs(t, n, func(i int) int64 { return int64(i) }, 0) })
	t.Run("pair", func(t *testing.T) { wireAllocs(t, n, func(i int) wirePair { return wirePair{int64(i), -int64(i)} }, 0) })
	t.Run("record", func(t *testing.T) {
		wireAllocs(t, n, func(i int) wireRecord { return wireRecord{Key: uint64(i), Pad: "padding"} }, n)
	})
	t.Run("string", func(t *testing.T) { wireAllocs(t, n, func(i int) string { return "value" }, n) })
	value := []byte("value")
	t.Run("bytes", func(t *testing.T) { wireAllocs(t, n, func(i int) []byte { return value }, n) })
}

// wireAllocs measures the allocations of Encode and Decode of batches of n
// records; decoding may allocate perRecord times besides the batch.
func wireAllocs[T any](t *testing.T, n int, gen func(int) T, perRecord int) {
	c := wireCodec[T](t, nil)
	pool := c.(*batchCodec[T]).pool
	b := make([]T, n)
	batch := any(b) // one box, given to Encode on every run
	rb := &messages.RecordBatch{}
	if a := testing.AllocsPerRun(50, func() {
		pool.Get() // what the sender's Collector takes; Encode gives it back
		for i := range b {
			b[i] = gen(i)
		}
		rb.Data, rb.Ends = rb.Data[:0], rb.Ends[:0]
		if err := c.Encode(batch, rb); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Encode of %d records allocates %v times, want 0", n, a)
	}
	if a := testing.AllocsPerRun(50, func() {
		v, err := c.Decode(rb)
		if err != nil {
			t.Fatal(err)
		}
		d := v.([]T)
		clear(d) // as ProcessBatch releases it
		pool.Put(v)
	}); a > float64(perRecord+1) {
		t.Errorf("Decode of %d records allocates %v times, want at most %d", n, a, perRecord+1)
	}
}

// BenchmarkEncodeDecodeBatch encodes and decodes batches of 256 records
// through a channel's default codec, releasing each decoded batch as
// ProcessBatch does. The json rows pass JSONCodec explicitly, for
// comparison with the binary layout.
func BenchmarkEncodeDecodeBatch(b *testing.B) {
	const n = 256
	b.Run("int64", func(b *testing.B) { benchWire(b, n, nil, func(i int) int64 { return int64(i) }) })
	b.Run("pair", func(b *testing.B) {
		benchWire(b, n, nil, func(i int) wirePair { return wirePair{int64(i), int64(i) * 3} })
	})
	b.Run("pair/json", func(b *testing.B) {
		benchWire(b, n, JSONCodec[wirePair]{}, func(i int) wirePair { return wirePair{int64(i), int64(i) * 3} })
	})
	b.Run("string", func(b *testing.B) { benchWire(b, n, nil, func(i int) string { return "a string of 24 bytes...." }) })
	b.Run("record", func(b *testing.B) {
		benchWire(b, n, nil, func(i int) wireRecord { return wireRecord{Key: uint64(i), TS: int64(i), Pad: "pad of 16 bytes."} })
	})
	b.Run("record/json", func(b *testing.B) {
		benchWire(b, n, JSONCodec[wireRecord]{}, func(i int) wireRecord {
			return wireRecord{Key: uint64(i), TS: int64(i), Pad: "pad of 16 bytes."}
		})
	})
}

func benchWire[T any](b *testing.B, n int, codec Codec[T], gen func(int) T) {
	var wrap func(Stream[T]) Stream[T]
	if codec != nil {
		wrap = func(s Stream[T]) Stream[T] { return WithWireCodec(s, codec) }
	}
	c := wireCodec(b, wrap)
	pool := poolOf[T]()
	rb := &messages.RecordBatch{}
	b.ReportAllocs()
	for b.Loop() {
		batch := takeBatch[T](pool, n)
		for i := range n {
			batch = append(batch, gen(i))
		}
		rb.Data, rb.Ends = rb.Data[:0], rb.Ends[:0]
		if err := c.Encode(batch, rb); err != nil {
			b.Fatal(err)
		}
		v, err := c.Decode(rb)
		if err != nil {
			b.Fatal(err)
		}
		clear(v.([]T))
		pool.Put(v)
	}
	records := float64(b.N) * float64(n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/records, "ns/record")
	b.ReportMetric(float64(len(rb.Data))/float64(n), "bytes/record")
}

// TestSplitKeepsCapacity checks that a batch processed in pieces keeps its
// capacity: the head is a batch of its own, big enough to be taken from the
// pool again, the tail is the batch itself with the rest moved to its start,
// and filling the head up to its capacity leaves the tail alone.
func TestSplitKeepsCapacity(t *testing.T) {
	type rec struct {
		N int64
		S string
	}
	c := wireCodec[rec](t, nil)
	b := make([]rec, 5, 8)
	for i := range b {
		b[i] = rec{int64(i), strconv.Itoa(i)}
	}
	h, tl := c.Split(b, 2)
	head, tail := h.([]rec), tl.([]rec)
	if want := []rec{{0, "0"}, {1, "1"}}; !slices.Equal(head, want) || cap(head) < cap(b) {
		t.Fatalf("head %v (cap %d), want %v with capacity %d", head, cap(head), want, cap(b))
	}
	if want := []rec{{2, "2"}, {3, "3"}, {4, "4"}}; !slices.Equal(tail, want) || cap(tail) != cap(b) || &tail[0] != &b[0] {
		t.Fatalf("tail %v (cap %d), want %v in the batch's own memory", tail, cap(tail), want)
	}
	if b[3] != (rec{}) || b[4] != (rec{}) {
		t.Errorf("moved records left behind: %v", b[:5])
	}
	for len(head) < cap(head) {
		head = append(head, rec{-1, "x"})
	}
	if want := []rec{{2, "2"}, {3, "3"}, {4, "4"}}; !slices.Equal(tail, want) {
		t.Errorf("tail %v after the head was filled, want %v", tail, want)
	}

	ts := make([]int64, 5, 8)
	for i := range ts {
		ts[i] = int64(10 + i)
	}
	ht, tt := SplitTimestamps(ts, 3)
	if !slices.Equal(ht, []int64{10, 11, 12}) || cap(ht) < cap(ts) || !slices.Equal(tt, []int64{13, 14}) || cap(tt) != cap(ts) {
		t.Errorf("SplitTimestamps: head %v (cap %d), tail %v (cap %d), want [10 11 12] and [13 14], both of capacity %d",
			ht, cap(ht), tt, cap(tt), cap(ts))
	}
}
