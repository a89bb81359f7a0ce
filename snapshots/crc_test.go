package snapshots_test

import (
	"math/rand/v2"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// TestCRCCombine checks that the CRC-32C of a concatenation computed from
// its parts' is the CRC-32C of the whole, for random splits.
func TestCRCCombine(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 5))
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(rnd.Uint32())
	}
	cases := [][2]int{{0, 0}, {0, 1}, {1, 1}, {0, 1 << 16}, {1 << 16, 1 << 16}, {3, 4}}
	for range 200 {
		a, b := rnd.IntN(len(data)+1), rnd.IntN(len(data)+1)
		cases = append(cases, [2]int{min(a, b), max(a, b)})
	}
	for _, c := range cases {
		whole := data[:c[1]]
		a, b := whole[:c[0]], whole[c[0]:]
		got := snapshots.CRCCombine(snapshots.Checksum(a), snapshots.Checksum(b), uint64(len(b)))
		if want := snapshots.Checksum(whole); got != want {
			t.Fatalf("combine of %d and %d bytes = %08x, want %08x", len(a), len(b), got, want)
		}
	}
}
