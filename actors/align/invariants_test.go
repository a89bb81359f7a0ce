package align

import "fmt"

// checkInvariants checks the Aligner's internal consistency between public
// calls.
func checkInvariants[M any](a *Aligner[M]) error {
	var buffered, arrived, open int
	for i := range a.bufs {
		n := a.bufs[i].len()
		buffered += n
		switch {
		case a.held[i]:
			return fmt.Errorf("input %d still held", i)
		case a.blocked[i] && a.ended[i]:
			return fmt.Errorf("input %d blocked and ended", i)
		case !a.blocked[i] && n > 0:
			return fmt.Errorf("input %d unblocked with %d buffered items", i, n)
		case a.ended[i] && !a.endSeen[i]:
			return fmt.Errorf("input %d ended without its end delivered", i)
		}
		if a.blocked[i] {
			arrived++
		}
		if !a.ended[i] {
			open++
		}
	}
	switch {
	case a.release:
		return fmt.Errorf("release pending")
	case buffered != a.buffered:
		return fmt.Errorf("buffered = %d, buffers hold %d", a.buffered, buffered)
	case arrived != a.arrived:
		return fmt.Errorf("arrived = %d, %d inputs blocked", a.arrived, arrived)
	case open != a.open:
		return fmt.Errorf("open = %d, %d inputs not ended", a.open, open)
	case (a.aligning == 0) != (arrived == 0):
		return fmt.Errorf("aligning %d with %d inputs blocked", a.aligning, arrived)
	case a.aligning != 0 && arrived >= open:
		return fmt.Errorf("aligning %d: all %d open inputs arrived but no snapshot", a.aligning, open)
	case a.aligning != 0 && a.aligning <= a.done:
		return fmt.Errorf("aligning %d <= done %d", a.aligning, a.done)
	case a.lastSnap > a.done:
		return fmt.Errorf("last snapshot %d > done %d", a.lastSnap, a.done)
	}
	return nil
}
