package dataflow

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/snapflow/snapflow/messages"
)

// ErrNoWireCodec is wrapped by the errors of Plan.CheckWire: a stream whose
// records the default wire codec cannot carry exactly between nodes, and
// that has no codec given by WithWireCodec.
var ErrNoWireCodec = errors.New("topology: no wire codec")

// ErrCorruptBatch is wrapped by the errors of BatchCodec.Decode: a
// RecordBatch whose record bounds do not fit its data, or a record that does
// not decode.
var ErrCorruptBatch = errors.New("topology: corrupt record batch")

// WithWireCodec returns s with c as its wire codec: in cluster mode, the
// records of s are encoded with c when they cross nodes, into the data of a
// messages.RecordBatch, and decoded with c on the receiving node. Records
// that stay on one node are passed as Go values and never encoded.
//
// Without WithWireCodec a stream uses the default wire codec. It accepts
// the types DefaultCodec stores exactly, under the same rules as state
// values (see Value); Plan.CheckWire refuses the others when a cluster job
// starts, naming the operators and the type. The wire is never persisted and
// every node runs the same binary, so the default encodes in its own
// compact binary layout the types made of booleans, numbers, strings, and
// slices, arrays and structs of them (field by field, little-endian, the
// same on every platform: JSON methods and tags play no part), and uses
// DefaultCodec (JSON) for the other types, such as those holding pointers,
// maps or time.Time.
//
// Give a codec for a type the default refuses (one with unexported fields,
// say), or for a faster or smaller encoding. c is called from several tasks
// at once, so it must be safe for concurrent use, and its Decode must not
// keep the bytes it is given: the buffer they come from may be reused.
//
// The codec belongs to the stream's edges into its consumer: apply
// WithWireCodec before KeyBy, Rebalance, Forward or Broadcast, which keep
// it, and Union keeps the codec of each stream it merges.
func WithWireCodec[T any](s Stream[T], c Codec[T]) Stream[T] {
	if c == nil {
		s.g.problem("%s: WithWireCodec with a nil codec", producers(s.parts))
		return s
	}
	parts := make([]part, len(s.parts))
	for i, pt := range s.parts {
		pt.wire = c
		parts[i] = pt
	}
	return Stream[T]{g: s.g, parts: parts}
}

// BatchCodec turns the batches of one plan channel into the records of a
// messages.RecordBatch and back, for channels between tasks on different
// nodes; Plan.ChannelCodec returns it. A batch is the []T, as an any, that a
// task's Collector hands to Sender.Send and that the receiving task's
// Instance.ProcessBatch takes, T being the channel's element type.
//
// Batches are pooled per element type: the Collector of every source and
// operator takes the slices it fills from the pool, and the ProcessBatch of
// every operator and sink (Map, Filter, FlatMap, Process, Sink) returns each
// batch it has processed to it, cleared; a batch whose processing fails is
// left to the garbage collector. A BatchCodec keeps that cycle on both
// nodes: Encode returns the batch it has encoded to the pool on the sending
// node, and Decode takes the batch it fills from the pool on the receiving
// node.
//
// A BatchCodec is safe for concurrent use.
type BatchCodec interface {
	// Encode appends the records of batch to rb.Data, and the end offset of
	// each in rb.Data to rb.Ends; it sets no other field. Ends count from
	// the start of rb.Data, so that a caller reusing a RecordBatch truncates
	// Data and Ends to length 0 and keeps their capacity (once the message
	// it was sent in has been marshalled: remote sends are asynchronous).
	//
	// Encode takes ownership of batch: once it returns, with or without an
	// error, the batch has been cleared and returned to its pool, and the
	// caller must not use it again. An error names the record and its type;
	// rb's Data and Ends then keep the length they had. A batch that is not
	// a []T of the channel's element type is refused, and left alone.
	Encode(batch any, rb *messages.RecordBatch) error
	// Decode returns the records of rb as a batch: a []T, taken from the pool
	// that ProcessBatch returns processed batches to, which the caller owns
	// and passes to ProcessBatch as if it had been sent in-process. The
	// records are copied out of rb, which Decode does not keep. Record ends
	// that decrease, or that do not end at the end of rb.Data, and records
	// that do not decode, are refused with an error wrapping ErrCorruptBatch.
	Decode(rb *messages.RecordBatch) (any, error)
	// Split cuts batch after its first n records (0 < n < its length):
	// head holds them and tail the rest. head is a batch of its own, taken
	// from the pool, and tail is batch with the rest moved to its start,
	// so that each keeps its whole capacity: the operator that takes head
	// returns it to its pool, and batch goes back with the last piece,
	// both big enough to be taken again. Nothing may hold batch elsewhere.
	Split(batch any, n int) (head, tail any)
}

// edgeCodec is the BatchCodec of one edge, which CheckWire asks whether its
// records can cross nodes.
type edgeCodec interface {
	BatchCodec
	// check returns why the default codec cannot carry the edge's records
	// exactly, wrapping ErrNoWireCodec, or nil.
	check() error
	// recordType names the edge's record type, for labels of channel state.
	recordType() string
	// keyGroups appends to dst the key group of each record of rb under
	// kg, the edge's key group function (a func(T) int).
	keyGroups(rb *messages.RecordBatch, kg any, dst []int) ([]int, error)
}

// ChannelCodec returns the wire codec of channel ch, a channel id as in
// Channels: the codec of the stream that the channel's edge carries. It is
// built once per edge, when the graph is, and returning it allocates
// nothing. It panics if ch is not a channel of p.
func (p *Plan) ChannelCodec(ch int) BatchCodec { return p.codecs[ch] }

// CheckWire refuses, with an error wrapping ErrNoWireCodec, every edge whose
// records the default wire codec cannot carry exactly between nodes, unless
// WithWireCodec gave its stream a codec. Each error names the producing
// operator, the consuming operator, the Go type and what makes it unfit
// (the same rules as DefaultCodec for state values: an unexported field, an
// interface, a channel, ...). The runtime calls it when a job starts in
// cluster mode; jobs in one process pass records as Go values and accept
// any type.
func (p *Plan) CheckWire() error {
	var errs []error
	seen := map[string]bool{}
	for _, e := range p.edges {
		if err := e.codec.check(); err != nil && !seen[err.Error()] {
			seen[err.Error()] = true
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// batchCodec is the BatchCodec of an edge carrying records of type T.
type batchCodec[T any] struct {
	from, to string // the producing and consuming operators
	typ      reflect.Type
	user     bool     // the codec was given by WithWireCodec
	codec    Codec[T] // encodes record by record, when layout is nil
	layout   *layout  // the default's binary layout of T, when T is flat
	pool     *sync.Pool
	// perRecord is the encoded bytes per record of the last batch, plus
	// one: Encode sizes Data for the next batch by it, rather than grow it
	// record by record. The tasks that send on the edge share it.
	perRecord atomic.Int64
}

// newBatchCodec returns the codec of an edge from operator from to operator
// to, encoding with c, or with the default when c is nil.
func newBatchCodec[T any](from, to string, c Codec[T]) *batchCodec[T] {
	t := reflect.TypeFor[T]()
	bc := &batchCodec[T]{from: from, to: to, typ: t, user: c != nil, codec: c, pool: poolOf[T]()}
	if c == nil {
		if bc.layout = layoutOf(t); bc.layout == nil {
			bc.codec = DefaultCodec[T]()
		}
	}
	return bc
}

func (c *batchCodec[T]) check() error {
	if c.user {
		return nil
	}
	p := checkDefaultCodec(c.typ)
	if p == nil {
		return nil
	}
	return &stateError{
		msg: fmt.Sprintf("topology: the stream from operator %q to operator %q cannot cross nodes: its record type %s: %s",
			c.from, c.to, typeName(c.typ), p.message("pass a codec with WithWireCodec")),
		sentinel: ErrNoWireCodec,
	}
}

// Encode implements BatchCodec.
func (c *batchCodec[T]) Encode(batch any, rb *messages.RecordBatch) error {
	b, ok := batch.([]T)
	if !ok {
		return fmt.Errorf("topology: wire encode from operator %q to operator %q: batch of type %T, want []%s",
			c.from, c.to, batch, typeName(c.typ))
	}
	var err error
	data, ends := rb.Data, slices.Grow(rb.Ends, len(b))
	if n := c.perRecord.Load(); n > 0 {
		data = slices.Grow(data, int(n)*len(b))
	}
	start := len(data)
	switch {
	case c.layout != nil && c.layout.packed:
		data, ends, err = c.encodePacked(data, ends, b)
	case c.layout != nil:
		base := unsafe.Pointer(unsafe.SliceData(b))
		for i := range b {
			data = c.layout.appendValue(data, unsafe.Add(base, uintptr(i)*c.layout.size))
			if ends, err = c.end(data, ends, i); err != nil {
				break
			}
		}
	default:
		for i := range b {
			if data, err = c.codec.Append(data, b[i]); err != nil {
				err = c.encodeError(i, err)
				break
			}
			if ends, err = c.end(data, ends, i); err != nil {
				break
			}
		}
	}
	if err == nil {
		rb.Data, rb.Ends = data, ends
		if len(b) > 0 {
			c.perRecord.Store(int64((len(data)-start)/len(b) + 1))
		}
	}
	// The sender gave the batch away: back to the pool its Collector takes
	// batches from, cleared so that it keeps no record alive.
	clear(b)
	c.pool.Put(batch)
	return err
}

// encodePacked copies the memory of b, whose type's wire form is its memory.
func (c *batchCodec[T]) encodePacked(data []byte, ends []uint32, b []T) ([]byte, []uint32, error) {
	size := int(c.layout.size)
	if len(b) > 0 && len(data)+len(b)*size > math.MaxUint32 {
		return data, ends, c.encodeError(0, fmt.Errorf("the batch would exceed %d bytes", uint64(math.MaxUint32)))
	}
	data = append(data, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b)*size)...)
	end := len(data) - len(b)*size
	for range b {
		end += size
		ends = append(ends, uint32(end))
	}
	return data, ends, nil
}

// end appends the end of record i, the length of data, to ends.
func (c *batchCodec[T]) end(data []byte, ends []uint32, i int) ([]uint32, error) {
	if len(data) > math.MaxUint32 {
		return ends, c.encodeError(i, fmt.Errorf("the batch would exceed %d bytes", uint64(math.MaxUint32)))
	}
	return append(ends, uint32(len(data))), nil
}

func (c *batchCodec[T]) encodeError(i int, err error) error {
	return fmt.Errorf("topology: wire encode from operator %q to operator %q: record %d of type %s: %w",
		c.from, c.to, i, typeName(c.typ), err)
}

// Decode implements BatchCodec.
func (c *batchCodec[T]) Decode(rb *messages.RecordBatch) (any, error) {
	data, ends := rb.Data, rb.Ends
	if err := c.checkEnds(data, ends); err != nil {
		return nil, err
	}
	b := takeBatch[T](c.pool, len(ends))[:len(ends)]
	var err error
	switch {
	case c.layout != nil && c.layout.packed:
		err = c.decodePacked(data, ends, b)
	case c.layout != nil:
		clear(b) // fields decoded as nil are not written
		err = c.decodeFlat(data, ends, b)
	default:
		err = c.decodeRecords(data, ends, b)
	}
	if err != nil {
		clear(b)
		c.pool.Put(b)
		return nil, err
	}
	return b, nil
}

func (c *batchCodec[T]) recordType() string { return typeName(c.typ) }

// Split implements BatchCodec.
func (c *batchCodec[T]) Split(batch any, n int) (head, tail any) {
	b := batch.([]T)
	h := append(takeBatch[T](c.pool, cap(b)), b[:n]...)
	k := copy(b, b[n:])
	clear(b[k:]) // the records moved keep nothing alive twice
	return h, b[:k]
}

func (c *batchCodec[T]) keyGroups(rb *messages.RecordBatch, kg any, dst []int) ([]int, error) {
	g, ok := kg.(keyGrouper[T])
	if !ok {
		return dst, fmt.Errorf("topology: the stream from operator %q to operator %q: key group function of type %T, want the key groups of %s records",
			c.from, c.to, kg, typeName(c.typ))
	}
	f := g.of
	b, err := c.Decode(rb)
	if err != nil {
		return dst, err
	}
	recs := b.([]T)
	for i := range recs {
		dst = append(dst, f(recs[i]))
	}
	clear(recs)
	c.pool.Put(b)
	return dst, nil
}

// checkEnds refuses record ends that decrease or that do not end at the
// end of data.
func (c *batchCodec[T]) checkEnds(data []byte, ends []uint32) error {
	prev := uint32(0)
	for i, e := range ends {
		if e < prev {
			return c.corrupt(fmt.Sprintf("record %d ends at byte %d, before its start at byte %d", i, e, prev), nil)
		}
		prev = e
	}
	switch {
	case uint64(prev) > uint64(len(data)):
		return c.corrupt(fmt.Sprintf("the records end at byte %d, beyond the %d bytes of data", prev, len(data)), nil)
	case uint64(prev) < uint64(len(data)):
		return c.corrupt(fmt.Sprintf("%d bytes of data after the last record, which ends at byte %d", len(data)-int(prev), prev), nil)
	}
	return nil
}

// decodePacked copies data into b, whose type's wire form is its memory.
func (c *batchCodec[T]) decodePacked(data []byte, ends []uint32, b []T) error {
	size := uint64(c.layout.size)
	for i, e := range ends {
		if uint64(e) != uint64(i+1)*size {
			start := uint64(0)
			if i > 0 {
				start = uint64(ends[i-1])
			}
			return c.recordError(i, len(ends), fmt.Errorf("%d bytes, want %d", uint64(e)-start, size))
		}
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(data)), data)
	return nil
}

// decodeFlat decodes the records of data into b, which holds zero values,
// with T's binary layout.
func (c *batchCodec[T]) decodeFlat(data []byte, ends []uint32, b []T) error {
	base := unsafe.Pointer(unsafe.SliceData(b))
	start := uint32(0)
	for i, end := range ends {
		rest, err := c.layout.decodeValue(data[start:end:end], unsafe.Add(base, uintptr(i)*c.layout.size))
		if err == nil && len(rest) > 0 {
			err = fmt.Errorf("%d bytes left over", len(rest))
		}
		if err != nil {
			return c.recordError(i, len(ends), err)
		}
		start = end
	}
	return nil
}

// decodeRecords decodes the records of data into b with the record codec.
func (c *batchCodec[T]) decodeRecords(data []byte, ends []uint32, b []T) error {
	start := uint32(0)
	for i, end := range ends {
		v, err := c.codec.Decode(data[start:end:end])
		if err != nil {
			return c.recordError(i, len(ends), err)
		}
		b[i] = v
		start = end
	}
	return nil
}

func (c *batchCodec[T]) recordError(i, n int, err error) error {
	return c.corrupt(fmt.Sprintf("record %d of %d, of type %s: %v", i, n, typeName(c.typ), err), err)
}

// corrupt returns an error wrapping ErrCorruptBatch, and cause if not nil.
func (c *batchCodec[T]) corrupt(what string, cause error) error {
	return &stateError{
		msg:      fmt.Sprintf("topology: record batch from operator %q to operator %q: %s", c.from, c.to, what),
		sentinel: ErrCorruptBatch, cause: cause,
	}
}
