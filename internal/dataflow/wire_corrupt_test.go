package dataflow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// Corrupt record batches and records that cannot be encoded.

// TestDecodeCorrupt feeds Decode record batches that do not hold what
// their codec encodes: each is refused with ErrCorruptBatch and a message
// saying what is wrong, without a panic.
func TestDecodeCorrupt(t *testing.T) {
	i64, small, slc := wireCodec[int64](t, nil), wireCodec[wireSmall](t, nil), wireCodec[wireSlices](t, nil)
	jsn := wireCodec[map[string]int](t, nil)
	user := wireCodec(t, func(s Stream[counter]) Stream[counter] { return WithWireCodec(s, newCounterCodec()) })
	eight := make([]byte, 8)
	smallRec := func(on byte, name []byte, rest ...byte) []byte {
		b := append([]byte{on}, name...)
		return append(append(b, 0), rest...) // Raw nil, then N
	}
	const prefix = `topology: record batch from operator "src" to operator "sink": `
	tests := []struct {
		name  string
		c     BatchCodec
		data  []byte
		ends  []uint32
		error string
	}{
		{"decreasing ends", i64, make([]byte, 16), []uint32{8, 4, 16}, "record 1 ends at byte 4, before its start at byte 8"},
		{"end beyond data", i64, eight, []uint32{16}, "the records end at byte 16, beyond the 8 bytes of data"},
		{"data after records", i64, make([]byte, 9), []uint32{8}, "1 bytes of data after the last record, which ends at byte 8"},
		{"data without records", i64, eight, nil, "8 bytes of data after the last record, which ends at byte 0"},
		{"wrong record size", i64, make([]byte, 16), []uint32{4, 16}, "record 0 of 2, of type int64: 4 bytes, want 8"},
		{"not a bool", small, smallRec(2, []byte{0}, 0, 0, 0, 0), []uint32{7}, "record 0 of 1, of type github.com/snapflow/snapflow/internal/dataflow.wireSmall: field On: byte 2 is not a bool"},
		{"string too long", small, smallRec(1, []byte{100, 'a'}), []uint32{4}, "record 0 of 1, of type github.com/snapflow/snapflow/internal/dataflow.wireSmall: field Name: length 100, beyond the 2 bytes left"},
		{"bad length", small, append([]byte{0}, bytes.Repeat([]byte{0xff}, 11)...), []uint32{12}, "record 0 of 1, of type github.com/snapflow/snapflow/internal/dataflow.wireSmall: field Name: bad length"},
		{"short number", small, smallRec(0, []byte{0}, 1, 2), []uint32{5}, "record 0 of 1, of type github.com/snapflow/snapflow/internal/dataflow.wireSmall: field N: 2 bytes left, want 4"},
		{"bytes left over", small, smallRec(0, []byte{0}, 1, 2, 3, 4, 5), []uint32{8}, "record 0 of 1, of type github.com/snapflow/snapflow/internal/dataflow.wireSmall: 1 bytes left over"},
		{"empty record", small, nil, []uint32{0}, "record 0 of 1, of type github.com/snapflow/snapflow/internal/dataflow.wireSmall: field On: 0 bytes left, want 1"},
		{"too many elements", slc, []byte{0xe9, 0x07, 1, 2}, []uint32{4}, "record 0 of 1, of type github.com/snapflow/snapflow/internal/dataflow.wireSlices: field P: 1000 elements, more than the 2 bytes left can hold"},
		{"bad json", jsn, []byte("{}nope"), []uint32{2, 6}, "record 1 of 2, of type map[string]int: topology: decode map[string]int: invalid character 'o' in literal null (expecting 'u')"},
		{"user codec", user, []byte("abc"), []uint32{3}, "record 0 of 1, of type github.com/snapflow/snapflow/internal/dataflow.counter: counter of 3 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := tt.c.Decode(&messages.RecordBatch{Data: tt.data, Ends: tt.ends})
			if v != nil || !errors.Is(err, ErrCorruptBatch) || err.Error() != prefix+tt.error {
				t.Errorf("Decode: %v, %v\nwant error %s", v, err, prefix+tt.error)
			}
		})
	}
}

// TestEncodeErrors checks Encode's refusals: a record its codec cannot
// encode, named with its index and type, and a batch of another type.
func TestEncodeErrors(t *testing.T) {
	c := wireCodec[cdWithAny](t, nil) // refused by CheckWire; encoded as JSON if the runtime does not ask
	batch := []cdWithAny{{V: 1}, {V: math.Inf(1)}}
	rb := &messages.RecordBatch{Data: []byte("kept"), Ends: []uint32{4}}
	err := c.Encode(batch, rb)
	want := `topology: wire encode from operator "src" to operator "sink": record 1 of type github.com/snapflow/snapflow/internal/dataflow.cdWithAny: ` +
		`topology: encode dataflow.cdWithAny: json: unsupported value: +Inf`
	if err == nil || err.Error() != want {
		t.Errorf("Encode: %v\nwant %s", err, want)
	}
	if string(rb.Data) != "kept" || !slices.Equal(rb.Ends, []uint32{4}) {
		t.Errorf("after a failed Encode, the batch holds %q %v, want what it held", rb.Data, rb.Ends)
	}
	if batch[0].V != nil {
		t.Error("the batch of a failed Encode was not released")
	}
	err = c.Encode([]int64{1}, rb)
	want = `topology: wire encode from operator "src" to operator "sink": batch of type []int64, want []github.com/snapflow/snapflow/internal/dataflow.cdWithAny`
	if err == nil || err.Error() != want {
		t.Errorf("Encode of another type: %v\nwant %s", err, want)
	}
}

// FuzzDecodeBatch decodes arbitrary record batches for codecs of every
// kind: a packed type, a flat one, a string, JSON and a user codec. Decode
// must refuse what it cannot decode with ErrCorruptBatch, never panic, and
// what it decodes must encode to bytes that decode and encode again to the
// same bytes.
func FuzzDecodeBatch(f *testing.F) {
	codecs := []BatchCodec{
		wireCodec[int64](f, nil),
		wireCodec[wireFlat](f, nil),
		wireCodec[string](f, nil),
		wireCodec[map[string]int](f, nil),
		wireCodec(f, func(s Stream[counter]) Stream[counter] { return WithWireCodec(s, newCounterCodec()) }),
		wireCodec[wireSmall](f, nil),
	}
	r := rand.New(rand.NewPCG(1, 2))
	seeds := []*messages.RecordBatch{
		encode(f, codecs[0], randRecords[int64](r, 3)),
		encode(f, codecs[1], randRecords[wireFlat](r, 2)),
		encode(f, codecs[2], []string{"a", "", "bc"}),
		encode(f, codecs[3], []map[string]int{{"a": 1}, nil}),
		encode(f, codecs[4], []counter{{"x", 1}}),
		encode(f, codecs[5], randRecords[wireSmall](r, 3)),
	}
	for i, rb := range seeds {
		f.Add(uint8(i), rb.Data, endsBytes(rb.Ends))
	}
	f.Fuzz(func(t *testing.T, which uint8, data, ends []byte) {
		c := codecs[int(which)%len(codecs)]
		rb := &messages.RecordBatch{Data: data}
		for i := 0; i+4 <= len(ends); i += 4 {
			rb.Ends = append(rb.Ends, binary.LittleEndian.Uint32(ends[i:]))
		}
		v, err := c.Decode(rb)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("Decode error without ErrCorruptBatch: %v", err)
			}
			return
		}
		once := &messages.RecordBatch{}
		if err := c.Encode(v, once); err != nil {
			t.Fatalf("encoding decoded records: %v", err)
		}
		back, err := c.Decode(once)
		if err != nil {
			t.Fatalf("decoding re-encoded records: %v", err)
		}
		twice := &messages.RecordBatch{}
		if err := c.Encode(back, twice); err != nil {
			t.Fatalf("encoding twice: %v", err)
		}
		if !bytes.Equal(once.Data, twice.Data) || !slices.Equal(once.Ends, twice.Ends) {
			t.Fatalf("encodings differ: % x %v, then % x %v", once.Data, once.Ends, twice.Data, twice.Ends)
		}
	})
}

func endsBytes(ends []uint32) []byte {
	var b []byte
	for _, e := range ends {
		b = binary.LittleEndian.AppendUint32(b, e)
	}
	return b
}
