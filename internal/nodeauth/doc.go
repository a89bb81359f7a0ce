// Package nodeauth authenticates the nodes of a snapflow cluster to each
// other at the transport, before protoactor-go's remote reads a message.
//
// protoactor-go's remote delivers any message from any peer that connects,
// system messages too (PoisonPill, Stop, Terminated), to any actor whose
// name it knows. So every node of a cluster shares a secret, and every gRPC
// call between nodes carries a token derived from it (an HMAC of a fixed
// label under the secret, so that the secret itself never crosses the
// wire). A node's server refuses a call without the token, or with another
// one, with codes.Unauthenticated before the call's handler runs: a peer
// without the secret can send nothing, and learns nothing.
//
// The token is a bearer credential: anyone who reads the traffic between
// two nodes can replay it. Mutual TLS keeps it secret on the wire, which is
// why a listener off loopback needs TLS unless the user opts out (see
// Listener).
package nodeauth
