package dataflow

import (
	"time"

	"github.com/snapflow/snapflow/messages"
)

// A restore judges each entry of a state with a time-to-live twice: under
// the time-to-live the checkpoint's descriptor gives the state (the one it
// was written and checkpointed under) and under the one the state declares
// now. An entry that has expired under either by the restore is not
// loaded, so that an entry which expired before the checkpoint (and which
// an incremental checkpoint or the on-disk backend's files may still hold)
// never comes back under a longer time-to-live, or none. An entry live
// under both expires under the new one, counted from its last write. A
// key group whose restore left an entry out, or whose state's time-to-live
// changed, is marked written, so that the next incremental checkpoint
// stores it again rather than refer back to an object that holds what the
// restore left out, or write times stamped under another time-to-live.

// storedExpired reports whether an entry written at written (0: unknown,
// a checkpoint without a time-to-live) had expired by now under the
// time-to-live stored, its state's in the checkpoint (0: none).
func storedExpired(written, stored, now int64) bool {
	return stored > 0 && written != 0 && now-written >= stored
}

// rememberStoredTTLs keeps, for the restore of a checkpoint with state
// descriptors descs, the time-to-live of each of its states.
func (s *KeyedSetup[K]) rememberStoredTTLs(descs []*messages.StateDescriptor) {
	s.storedTTL = nil
	for _, d := range descs {
		if d.GetTtlNanos() > 0 {
			if s.storedTTL == nil {
				s.storedTTL = make(map[string]int64, len(descs))
			}
			s.storedTTL[d.GetName()] = d.GetTtlNanos()
		}
	}
}

// tickRestore reads the processing time a restore judges expiries at,
// when a state has a time-to-live now or had one in the checkpoint.
func (s *KeyedSetup[K]) tickRestore() {
	if !s.ttl && len(s.storedTTL) == 0 {
		return
	}
	if s.clock == nil {
		s.clock = func() int64 { return time.Now().UnixNano() }
	}
	s.now = s.clock()
}

// restoreNamed loads the entries ns holds of state ks in key group kg,
// leaving out those expired under the checkpoint's time-to-live.
func (s *KeyedSetup[K]) restoreNamed(ks keyedState, kg int, ns *messages.NamedState) error {
	stored := s.storedTTL[ns.GetName()]
	if stored != ks.descriptor().GetTtlNanos() && len(ns.GetEntries()) > 0 {
		s.markGroup(kg)
	}
	for _, e := range ns.GetEntries() {
		if storedExpired(e.GetWrittenAt(), stored, s.now) {
			s.markGroup(kg)
			continue
		}
		if err := ks.restoreEntry(kg, e); err != nil {
			return err
		}
	}
	return nil
}
