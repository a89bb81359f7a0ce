package dataflow_test

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
)

// reading has an unexported field, which the default wire codec refuses.
type reading struct {
	sensor string
	Value  int64
}

// readingCodec stores a reading as its value, then its sensor.
type readingCodec struct{}

func (readingCodec) Append(dst []byte, r reading) ([]byte, error) {
	return append(binary.BigEndian.AppendUint64(dst, uint64(r.Value)), r.sensor...), nil
}

func (readingCodec) Decode(b []byte) (reading, error) {
	if len(b) < 8 {
		return reading{}, fmt.Errorf("reading of %d bytes", len(b))
	}
	return reading{sensor: string(b[8:]), Value: int64(binary.BigEndian.Uint64(b))}, nil
}

// readingsJob is a job whose readings cross to a sink, through wrap.
func readingsJob(wrap func(dataflow.Stream[reading]) dataflow.Stream[reading]) *dataflow.Plan {
	g := dataflow.New("readings")
	s := wrap(dataflow.FromSlice(g, "sensors", []reading{{"s1", 20}}))
	dataflow.Sink(s, "store", func(reading) error { return nil })
	p, err := dataflow.NewPlan(g)
	if err != nil {
		panic(err)
	}
	return p
}

// A cluster job refuses a stream whose records the default wire codec
// cannot carry exactly, unless WithWireCodec gives it a codec. The runtime
// encodes and decodes the batches of a channel between nodes with the
// channel's codec.
func ExampleWithWireCodec() {
	p := readingsJob(func(s dataflow.Stream[reading]) dataflow.Stream[reading] { return s })
	err := p.CheckWire()
	fmt.Println(errors.Is(err, dataflow.ErrNoWireCodec))
	fmt.Println(err)

	p = readingsJob(func(s dataflow.Stream[reading]) dataflow.Stream[reading] {
		return dataflow.WithWireCodec(s, readingCodec{})
	})
	fmt.Println(p.CheckWire())
	codec := p.ChannelCodec(0)
	rb := &messages.RecordBatch{}
	if err := codec.Encode([]reading{{"s1", 20}, {"s2", 21}}, rb); err != nil {
		panic(err)
	}
	fmt.Printf("%d records in %d bytes\n", rb.Len(), len(rb.Data))
	batch, err := codec.Decode(rb)
	fmt.Printf("%+v %v\n", batch, err)
	// Output:
	// true
	// topology: the stream from operator "sensors" to operator "store" cannot cross nodes: its record type github.com/snapflow/snapflow/internal/dataflow_test.reading: field sensor is unexported, and JSON skips it; export it or pass a codec with WithWireCodec
	// <nil>
	// 2 records in 20 bytes
	// [{sensor:s1 Value:20} {sensor:s2 Value:21}] <nil>
}
