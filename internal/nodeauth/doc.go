// Package nodeauth authenticates the nodes of a snapflow cluster to each
// other at the transport, before protoactor-go's remote reads a message.
//
// protoactor-go's remote delivers any message from any peer that connects,
// system messages too (PoisonPill, Stop, Terminated), to any actor whose
// name it knows. So every node of a cluster shares a secret, and every
// connection between nodes starts with a handshake (Credentials, after TLS
// when it is on) in which the accepting node proves the secret first and
// the dialling node second, each with an HMAC under a key derived from the
// secret and a signature by its own node key (Identity), both over a
// transcript of the two nonces, the two keys, the two nodes' jobs, the
// accepting node's address and the connection's TLS exporter. Nothing
// either side sends is of use on another connection, later, towards
// another node or for another job. The pure protocol (Client, Server, the
// frames) is apart from its I/O (Credentials) and tested deterministically.
//
// A completed connection's AuthInfo names the peer's node key (PeerOf), so
// that a coordinator can read a message that names a worker only from that
// worker's node (WorkerID, OwnsWorker).
//
// ReadSecretFile and CreateSecretFile keep the secret in a private file,
// as ssh keeps keys.
package nodeauth
