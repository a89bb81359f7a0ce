package messages

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
)

func sampleBatch() *RecordBatch {
	in := &RecordBatch{Epoch: 3, Channel: 1, Seq: 42}
	for i := range 256 {
		in.AppendRecord([]byte{byte(i), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	}
	return in
}

func TestRecordBatchRoundTrip(t *testing.T) {
	in := sampleBatch()
	buf, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &RecordBatch{}
	if err := proto.Unmarshal(buf, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Validate(); err != nil || out.Len() != 256 {
		t.Fatalf("decoded %d records: %v", out.Len(), err)
	}
	for i := range out.Len() {
		if !bytes.Equal(out.Record(i), in.Record(i)) {
			t.Fatalf("record %d differs", i)
		}
	}
	out.Ends[3] = 1 << 30
	if out.Validate() == nil {
		t.Fatal("a record past the data was accepted")
	}
}

// BenchmarkRecordBatchCodec encodes and decodes a RecordBatch of 256
// records of 16 bytes, the form a batch takes across processes. The
// allocations are per batch, not per record.
func BenchmarkRecordBatchCodec(b *testing.B) {
	in := sampleBatch()
	var buf []byte
	out := &RecordBatch{}
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = proto.MarshalOptions{}.MarshalAppend(buf[:0], in)
		if err != nil {
			b.Fatal(err)
		}
		out.Reset()
		if err := proto.Unmarshal(buf, out); err != nil {
			b.Fatal(err)
		}
	}
	if out.Len() != 256 {
		b.Fatal("lost records")
	}
	b.ReportMetric(float64(b.N)*256/b.Elapsed().Seconds(), "records/s")
}
