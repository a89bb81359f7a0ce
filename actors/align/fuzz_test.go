package align

import "testing"

// FuzzAligner decodes bytes into an event sequence that respects the
// per-input protocol (barrier ids increase on each input, nothing after an
// end) and checks the invariants of the checker on every action.
//
// Byte 0: bits 0-2 pick the number of inputs (1..8), bit 7 ends every input
// at the end. Each further byte b: input (b>>2)%k, op b&3:
//
//	0, 1: data
//	2:    barrier last+1, or last+2 (a skipped checkpoint) if b>>6 == 3
//	3:    end if bit 5 is clear, else AbortCheckpoint(highest id seen - b>>6)
func FuzzAligner(f *testing.F) {
	f.Add([]byte{0x01, 0x00, 0x02, 0x04, 0x00, 0x06, 0x04})
	f.Add([]byte{0x82, 0x02, 0x00, 0x00, 0x06, 0x02, 0x04, 0x06, 0x03})
	f.Add([]byte{0x02, 0x02, 0x00, 0x06, 0x04, 0xc2, 0x00, 0x06, 0x0a, 0x23, 0x27})
	f.Add([]byte{0x83, 0x02, 0x00, 0x02, 0x00, 0x06, 0x04, 0x06, 0x04, 0x0b, 0xc2, 0x06})
	f.Fuzz(fuzzAligner)
}

func fuzzAligner(t *testing.T, data []byte) {
	if len(data) == 0 {
		return
	}
	k := int(data[0]&7) + 1
	c := newChecker(k)
	var maxID uint64
	for _, b := range data[1:] {
		i := int(b>>2) % k
		for n := 0; n < k && !c.open(i); n++ {
			i = (i + 1) % k
		}
		if !c.open(i) {
			break
		}
		var err error
		switch op := b & 3; {
		case op <= 1:
			err = c.data(i)
		case op == 2:
			id := c.maxBarrier[i] + 1
			if b>>6 == 3 {
				id++
			}
			maxID = max(maxID, id)
			err = c.barrier(i, id)
		case b&0x20 == 0:
			err = c.end(i)
		default:
			if d := uint64(b >> 6); d < maxID {
				err = c.abort(maxID - d)
			}
		}
		if err != nil {
			t.Fatalf("%v\n%s", err, c)
		}
	}
	if data[0]&0x80 != 0 {
		for i := range k {
			if c.open(i) {
				if err := c.end(i); err != nil {
					t.Fatalf("%v\n%s", err, c)
				}
			}
		}
	}
	if err := c.finish(); err != nil {
		t.Fatalf("%v\n%s", err, c)
	}
}
