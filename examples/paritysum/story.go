package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/snapflow/snapflow/actors"
)

// story collects the job's events for a short account at the end.
type story struct {
	mu        sync.Mutex
	start     time.Time
	completed int
	lines     []string
}

func (s *story) event(e actors.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start.IsZero() {
		s.start = e.Time
	}
	at := e.Time.Sub(s.start).Round(time.Millisecond)
	switch e.Kind {
	case actors.EventCheckpointCompleted:
		s.completed++
		switch {
		case e.Final:
			s.lines = append(s.lines, fmt.Sprintf("%8v  final checkpoint %d complete (%d bytes of state)", at, e.Checkpoint, e.Bytes))
		case s.completed <= 5:
			s.lines = append(s.lines, fmt.Sprintf("%8v  checkpoint %d complete in %v (%d bytes of state)", at, e.Checkpoint, e.Duration.Round(time.Microsecond), e.Bytes))
		case s.completed == 6:
			s.lines = append(s.lines, fmt.Sprintf("%8v  ... further checkpoints are counted below", at))
		}
	case actors.EventTaskFailed:
		s.lines = append(s.lines, fmt.Sprintf("%8v  task %s failed in epoch %d: %v", at, e.Task, e.Epoch, e.Err))
	case actors.EventRestoring:
		s.lines = append(s.lines, fmt.Sprintf("%8v  rolling back to checkpoint %d in epoch %d (every task restores its state, the source rewinds)", at, e.Checkpoint, e.Epoch))
	case actors.EventRunning:
		s.lines = append(s.lines, fmt.Sprintf("%8v  running in epoch %d from checkpoint %d", at, e.Epoch, e.Checkpoint))
	case actors.EventCheckpointAborted:
		s.lines = append(s.lines, fmt.Sprintf("%8v  checkpoint %d aborted: %v", at, e.Checkpoint, e.Err))
	case actors.EventFinished:
		s.lines = append(s.lines, fmt.Sprintf("%8v  every source ended; job finished", at))
	}
}

func (s *story) print(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(w, "what happened:")
	for _, l := range s.lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintf(w, "%d checkpoints completed\n", s.completed)
}
