package engine

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/nodeauth"
)

// refusedLogger logs the connections a node's server refused, as a warning
// naming the peer: a failed TLS handshake on its own line, so a node
// without TLS against one with it is told at the first attempt. The first
// refusal from a host for a reason is logged at once, then again after
// dialRepeat; a flood (a port scan, a peer that retries) is logged at
// every doubling of the count, not once a connection.
func refusedLogger(log *slog.Logger) func(nodeauth.Refusal) {
	seen := repeatFilter()
	return func(r nodeauth.Refusal) {
		n := nodeauth.Rejected.Load()
		host := r.Peer
		if h, _, err := net.SplitHostPort(r.Peer); err == nil {
			host = h
		}
		if !seen(host, r.Reason) && n&(n-1) != 0 {
			return
		}
		msg := "refused a connection from outside the cluster"
		if r.TLS {
			msg = "refused a TLS handshake"
		}
		log.Warn(msg, "peer", r.Peer, "reason", r.Reason, "refused_so_far", n)
	}
}

// repeatFilter returns a function that reports whether a (peer, reason)
// pair is new, or was last reported dialRepeat ago or more.
func repeatFilter() func(peer, reason string) bool {
	var mu sync.Mutex
	last := map[[2]string]time.Time{}
	return func(peer, reason string) bool {
		k, now := [2]string{peer, reason}, time.Now()
		mu.Lock()
		defer mu.Unlock()
		if now.Sub(last[k]) < dialRepeat {
			return false
		}
		if len(last) >= 1024 { // reasons vary: keep the memory bounded
			clear(last)
		}
		last[k] = now
		return true
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
	fresh := repeatFilter()
	return func(r nodeauth.Refusal) {
		if fresh(r.Peer, r.Reason) {
			log.Warn("cannot connect to a node of the cluster", "peer", r.Peer, "reason", r.Reason)
		}
	}
}
