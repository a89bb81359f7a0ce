package messages

import "fmt"

// AppendRecord appends one encoded record to the batch.
func (b *RecordBatch) AppendRecord(rec []byte) {
	b.Data = append(b.Data, rec...)
	b.Ends = append(b.Ends, uint32(len(b.Data)))
}

// Len is the number of records in the batch.
func (b *RecordBatch) Len() int { return len(b.Ends) }

// Record returns record i, aliasing the batch's data.
func (b *RecordBatch) Record(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = b.Ends[i-1]
	}
	return b.Data[start:b.Ends[i]]
}

// Validate checks that the record bounds fit the data.
func (b *RecordBatch) Validate() error {
	prev := uint32(0)
	for i, e := range b.Ends {
		if e < prev || int(e) > len(b.Data) {
			return fmt.Errorf("messages: record batch: record %d ends at %d, after %d, with %d bytes of data", i, e, prev, len(b.Data))
		}
		prev = e
	}
	return nil
}
