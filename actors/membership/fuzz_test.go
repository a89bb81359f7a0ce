package membership

import (
	"errors"
	"fmt"
	"testing"
)

// FuzzPlace reads a plan and workers from bytes (the first byte splits them:
// low nibble operators, high nibble workers; then one byte per operator's
// parallelism and one per worker's slots, each 1..8) and checks the
// properties of TestPlaceProperties.
func FuzzPlace(f *testing.F) {
	f.Add([]byte{0x23, 3, 6, 5, 4, 1, 3, 3, 3})
	f.Add([]byte{0x22, 3, 2, 1, 4})
	f.Add([]byte{0x11, 1, 1})
	f.Add([]byte{0x44, 8, 1, 2, 3, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		nops, nworkers := int(data[0]&0x0f)%8, int(data[0]>>4)%8
		data = data[1:]
		if len(data) < nops+nworkers {
			return
		}
		var ops []string
		for i := range nops {
			ops = append(ops, fmt.Sprintf("op%d:%d", i, 1+int(data[i])%8))
		}
		slots := make([]int, nworkers)
		for i := range slots {
			slots[i] = 1 + int(data[nops+i])%8
		}
		tasks, ws := plan(ops...), workers(slots...)
		where := fmt.Sprintf("ops %v, slots %v", ops, slots)
		p, err := Place(tasks, ws)
		total := 0
		for _, s := range slots {
			total += s
		}
		if total < len(tasks) {
			if !errors.Is(err, ErrNotEnoughSlots) {
				t.Fatalf("%s: error %v, want ErrNotEnoughSlots", where, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		checkPlacement(t, where, p, tasks, ws)
		if canSpread(tasks, ws) {
			checkSpread(t, where, p, tasks, ws)
		}
	})
}
