package engine

import (
	"log/slog"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/nodeauth"
)

// refusedLogger logs each connection a node's server refused, at once, as
// a warning naming the peer: a failed TLS handshake on its own line, so a
// node without TLS against one with it is told at the first attempt.
func refusedLogger(log *slog.Logger) func(nodeauth.Refusal) {
	return func(r nodeauth.Refusal) {
		msg := "refused a connection from outside the cluster"
		if r.TLS {
			msg = "refused a TLS handshake"
		}
		log.Warn(msg, "peer", r.Peer, "reason", r.Reason, "refused_so_far", nodeauth.Rejected.Load())
	}
}

// dialRepeat is how long a node keeps quiet about a connection it could not
// make for the same reason again (the writer retries every 2 s).
const dialRepeat = 30 * time.Second

// dialFailedLogger logs each connection to a peer that failed at TLS or at
// the node handshake, as a warning naming the peer and why ("TLS
// mismatch: ..." when one side has TLS and the other none), once per peer
// and reason every dialRepeat.
func dialFailedLogger(log *slog.Logger) func(nodeauth.Refusal) {
	var mu sync.Mutex
	last := map[[2]string]time.Time{}
	return func(r nodeauth.Refusal) {
		k, now := [2]string{r.Peer, r.Reason}, time.Now()
		mu.Lock()
		quiet := now.Sub(last[k]) < dialRepeat
		if !quiet {
			if len(last) >= 1024 { // reasons vary: keep the memory bounded
				clear(last)
			}
			last[k] = now
		}
		mu.Unlock()
		if !quiet {
			log.Warn("cannot connect to a node of the cluster", "peer", r.Peer, "reason", r.Reason)
		}
	}
}
