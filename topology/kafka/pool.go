package kafka

import "fmt"

// idPool decides which transactional id of a sink task's pool each
// transaction takes. A slot is free, or holds an open or pre-committed
// transaction (busy), or holds a committed one that a checkpoint may still
// list as pending. A restore of such a checkpoint commits that transaction
// again with its stored producer id and epoch, which works only while
// nothing else has used the id; so a slot is reused only once a checkpoint
// whose snapshot came after the commit has completed, which the pool
// learns when a transaction pre-committed after the commit commits itself.
//
// Checkpoints complete in order, and a task restores the newest complete
// one; so no automatic restore ever finds a listed transaction's id used
// again.
type idPool struct {
	slots    []poolSlot
	barriers uint64 // pre-commits so far
}

type poolSlot struct {
	busy        bool
	preAt       uint64 // barriers after its pre-commit; 0 while open
	committed   bool   // committed, not yet reusable
	committedAt uint64 // barriers when it committed
}

func newIDPool(n int) *idPool { return &idPool{slots: make([]poolSlot, n)} }

// take returns the first free slot and makes it busy; with none free, it
// returns an error that says why.
func (p *idPool) take() (int, error) {
	for i, s := range p.slots {
		if !s.busy && !s.committed {
			p.slots[i] = poolSlot{busy: true}
			return i, nil
		}
	}
	var busy int
	for _, s := range p.slots {
		if s.busy {
			busy++
		}
	}
	return -1, fmt.Errorf("all %d transactional ids are in use: %d by transactions open or waiting for their checkpoint to complete, %d by committed ones waiting for the next checkpoint to complete; checkpoints are not completing, or SinkConfig.PoolSize is too small",
		len(p.slots), busy, len(p.slots)-busy)
}

// preCommit records the pre-commit of busy slot i's transaction.
func (p *idPool) preCommit(i int) {
	p.barriers++
	p.slots[i].preAt = p.barriers
}

// commit records the commit of slot i's pre-committed transaction, and
// frees the slots whose transactions committed before its pre-commit.
func (p *idPool) commit(i int) {
	preAt := p.slots[i].preAt
	p.slots[i] = poolSlot{committed: true, committedAt: p.barriers}
	for j := range p.slots {
		if p.slots[j].committed && p.slots[j].committedAt < preAt {
			p.slots[j].committed = false
		}
	}
}

// restored records that a restore committed slot i's transaction.
func (p *idPool) restored(i int) {
	p.slots[i] = poolSlot{committed: true, committedAt: p.barriers}
}

// preCommitted reports whether slot i holds a pre-committed transaction.
func (p *idPool) preCommitted(i int) bool { return p.slots[i].busy && p.slots[i].preAt > 0 }
