package nodeauth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
)

// The handshake, run once per connection before gRPC speaks (see
// Credentials), in three messages:
//
//	client → server  Hello:       a fresh nonce, its public key, its jobs
//	server → client  ServerProof: a fresh nonce, its public key, address and
//	                 jobs, an HMAC under the cluster's key and a signature
//	                 by its node key, both over the transcript
//	client → server  ClientProof: the same two, over the same transcript
//
// The transcript holds both nonces, both keys, both sets of jobs, the
// server's address and the TLS exporter of the connection (empty without
// TLS). So the side that accepts proves the secret first, and neither
// proof is any use on another connection (other nonces, another exporter),
// from another node (another key), for another job, or at another address.

// Errors of the handshake; each refusal wraps one.
var (
	// ErrSecret: the peer does not prove the cluster's secret.
	ErrSecret = errors.New("nodeauth: the peer does not prove the cluster's secret")
	// ErrIdentity: the peer's signature does not verify, or it presents
	// this node's own key (a reflected handshake).
	ErrIdentity = errors.New("nodeauth: the peer's node identity does not verify")
	// ErrJob: the two nodes share no job.
	ErrJob = errors.New("nodeauth: the peers share no job")
	// ErrAddress: the node answering is not the one dialled.
	ErrAddress = errors.New("nodeauth: the node answering is not at the address dialled")
	// ErrReplay: a proof presented twice to one handshake.
	ErrReplay = errors.New("nodeauth: a handshake step repeated")
	// ErrMalformed: a message of the handshake does not parse.
	ErrMalformed = errors.New("nodeauth: a malformed handshake message")
)

const (
	nonceSize = 32
	// domain separates this protocol's MACs and signatures from any other
	// use of the secret or the keys.
	domain = "snapflow node auth v2"
)

// Identity is a node's key pair, made anew for each process. Its ID, a
// fingerprint of the public key, names the node to its peers, which learn
// it from a signature only the node can make.
type Identity struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	ID   string
}

// NewIdentity makes an identity from 32 bytes of rand.
func NewIdentity(rand io.Reader) (*Identity, error) {
	pub, priv, err := ed25519.GenerateKey(rand)
	if err != nil {
		return nil, fmt.Errorf("nodeauth: node key: %w", err)
	}
	return &Identity{priv: priv, pub: pub, ID: KeyID(pub)}, nil
}

// KeyID is the id of a node's public key: the first 64 bits of its
// SHA-256, in hex.
func KeyID(pub []byte) string {
	h := sha256.Sum256(pub)
	return hex.EncodeToString(h[:8])
}

// WorkerID is the id of a worker's n-th registration: it names the node
// that registers, so that the coordinator can tell whether a message about
// a worker comes from that worker's node (see OwnsWorker).
func WorkerID(node string, n uint64) string { return fmt.Sprintf("w-%s-%d", node, n) }

// OwnsWorker reports whether the node with id node may speak for the
// worker id worker: only a worker id WorkerID made of node.
func OwnsWorker(node, worker string) bool {
	rest, ok := strings.CutPrefix(worker, "w-"+node+"-")
	return ok && node != "" && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// Peer is what a completed handshake proved about the other side.
type Peer struct {
	ID      string   // KeyID of its key
	Address string   // the address it says it listens on (server side: as it said)
	Jobs    []string // the jobs it serves
}

// Hello is the client's first message.
type Hello struct {
	Nonce []byte
	Key   []byte
	Jobs  []string
}

// ServerProof is the server's answer to a Hello.
type ServerProof struct {
	Nonce   []byte
	Key     []byte
	Address string
	Jobs    []string
	MAC     []byte
	Sig     []byte
}

// ClientProof is the client's proof, the handshake's last message.
type ClientProof struct {
	MAC []byte
	Sig []byte
}

// Local is what a node brings to a handshake.
type Local struct {
	Secret   string
	Identity *Identity
	Address  string   // the address it listens on, as its peers dial it
	Jobs     []string // the jobs it serves
}

// clusterKey derives the key of the MACs from the secret.
func clusterKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(domain + " key"))
	return m.Sum(nil)
}

// transcript hashes what both sides said, and the connection's exporter.
func transcript(h *Hello, s *ServerProof, exporter []byte) []byte {
	d := sha256.New()
	field := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		d.Write(n[:])
		d.Write(b)
	}
	field([]byte(domain))
	field(h.Nonce)
	field(h.Key)
	field([]byte(strings.Join(h.Jobs, "\x00")))
	field(s.Nonce)
	field(s.Key)
	field([]byte(s.Address))
	field([]byte(strings.Join(s.Jobs, "\x00")))
	field(exporter)
	return d.Sum(nil)
}

func mac(key []byte, role string, t []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(role))
	m.Write(t)
	return m.Sum(nil)
}

func signed(role string, t []byte) []byte { return append([]byte(domain+" "+role), t...) }

// Client is the dialling side of one handshake.
type Client struct {
	local    Local
	key      []byte
	hello    *Hello
	exporter []byte
	dialled  string // the address dialled; "" skips the address check
	done     bool
}

// NewClient starts a handshake towards dialled (checked against the
// server's address only when not "": see SameAddress), with rand for the
// nonce and exporter the connection's TLS exporter (nil without TLS).
func NewClient(l Local, dialled string, exporter []byte, rand io.Reader) (*Client, *Hello, error) {
	nonce := make([]byte, nonceSize)
	if _, err := io.ReadFull(rand, nonce); err != nil {
		return nil, nil, fmt.Errorf("nodeauth: nonce: %w", err)
	}
	h := &Hello{Nonce: nonce, Key: l.Identity.pub, Jobs: l.Jobs}
	return &Client{local: l, key: clusterKey(l.Secret), hello: h, exporter: exporter, dialled: dialled}, h, nil
}

// Verify checks the server's proof and returns the client's, and what the
// server proved. It refuses before proving anything of its own.
func (c *Client) Verify(s *ServerProof) (*ClientProof, Peer, error) {
	if c.done {
		return nil, Peer{}, ErrReplay
	}
	c.done = true
	if len(s.Nonce) != nonceSize || len(s.Key) != ed25519.PublicKeySize {
		return nil, Peer{}, ErrMalformed
	}
	t := transcript(c.hello, s, c.exporter)
	if !hmac.Equal(s.MAC, mac(c.key, "server", t)) {
		return nil, Peer{}, fmt.Errorf("%w (another secret, or not a snapflow node)", ErrSecret)
	}
	if !ed25519.Verify(s.Key, signed("server", t), s.Sig) {
		return nil, Peer{}, fmt.Errorf("%w: a bad signature", ErrIdentity)
	}
	if bytes.Equal(s.Key, c.local.Identity.pub) {
		return nil, Peer{}, fmt.Errorf("%w: it presents this node's own key (a reflected connection)", ErrIdentity)
	}
	if c.dialled != "" && !SameAddress(c.dialled, s.Address) {
		return nil, Peer{}, fmt.Errorf("%w: dialled %s, the node answering listens on %s", ErrAddress, c.dialled, s.Address)
	}
	if !shareJob(c.local.Jobs, s.Jobs) {
		return nil, Peer{}, fmt.Errorf("%w: this node serves %v, the peer %v", ErrJob, c.local.Jobs, s.Jobs)
	}
	p := &ClientProof{MAC: mac(c.key, "client", t), Sig: ed25519.Sign(c.local.Identity.priv, signed("client", t))}
	return p, Peer{ID: KeyID(s.Key), Address: s.Address, Jobs: s.Jobs}, nil
}

// Server is the accepting side of one handshake.
type Server struct {
	local    Local
	key      []byte
	exporter []byte
	hello    *Hello
	proof    *ServerProof
	done     bool
}

// NewServer starts a handshake on an accepted connection whose TLS
// exporter is exporter (nil without TLS).
func NewServer(l Local, exporter []byte) *Server {
	return &Server{local: l, key: clusterKey(l.Secret), exporter: exporter}
}

// Answer proves the secret to the client of h, with a fresh nonce from
// rand: the server proves first.
func (s *Server) Answer(h *Hello, rand io.Reader) (*ServerProof, error) {
	if s.hello != nil {
		return nil, ErrReplay
	}
	if len(h.Nonce) != nonceSize || len(h.Key) != ed25519.PublicKeySize {
		return nil, ErrMalformed
	}
	nonce := make([]byte, nonceSize)
	if _, err := io.ReadFull(rand, nonce); err != nil {
		return nil, fmt.Errorf("nodeauth: nonce: %w", err)
	}
	p := &ServerProof{Nonce: nonce, Key: s.local.Identity.pub, Address: s.local.Address, Jobs: s.local.Jobs}
	t := transcript(h, p, s.exporter)
	p.MAC = mac(s.key, "server", t)
	p.Sig = ed25519.Sign(s.local.Identity.priv, signed("server", t))
	s.hello, s.proof = h, p
	return p, nil
}

// Finish checks the client's proof: once per handshake, against this
// handshake's nonces only.
func (s *Server) Finish(c *ClientProof) (Peer, error) {
	if s.proof == nil || s.done {
		return Peer{}, ErrReplay
	}
	s.done = true
	t := transcript(s.hello, s.proof, s.exporter)
	if !hmac.Equal(c.MAC, mac(s.key, "client", t)) {
		return Peer{}, fmt.Errorf("%w: its proof is not for this connection, or not under the cluster's secret", ErrSecret)
	}
	if !ed25519.Verify(s.hello.Key, signed("client", t), c.Sig) {
		return Peer{}, fmt.Errorf("%w: a bad signature", ErrIdentity)
	}
	if bytes.Equal(s.hello.Key, s.local.Identity.pub) {
		return Peer{}, fmt.Errorf("%w: it presents this node's own key (a reflected connection)", ErrIdentity)
	}
	if !shareJob(s.local.Jobs, s.hello.Jobs) {
		return Peer{}, fmt.Errorf("%w: this node serves %v, the peer %v", ErrJob, s.local.Jobs, s.hello.Jobs)
	}
	return Peer{ID: KeyID(s.hello.Key), Jobs: s.hello.Jobs}, nil
}

func shareJob(a, b []string) bool {
	for _, j := range a {
		if slices.Contains(b, j) {
			return true
		}
	}
	return false
}

// SameAddress reports whether a server that says it listens on listens
// may be the node dialled at dialled: the ports must be equal, and the
// hosts too unless either is a name or an unspecified address (0.0.0.0,
// ::) or both are loopback. It guards connections without TLS, where
// nothing else tells a relay to another node of the cluster from the node
// dialled; with TLS, the exporter binds the proofs to the connection.
func SameAddress(dialled, listens string) bool {
	dh, dp, err1 := splitHostPort(dialled)
	lh, lp, err2 := splitHostPort(listens)
	if err1 != nil || err2 != nil || dp != lp {
		return false
	}
	switch di, li := parseIP(dh), parseIP(lh); {
	case strings.EqualFold(dh, lh), Loopback(dh) && Loopback(lh):
		return true
	case Loopback(dh) || Loopback(lh):
		// One loopback, the other not: a name or an unspecified address
		// may still be this host, another address never is.
		other := li
		if Loopback(lh) {
			other = di
		}
		return other == nil || other.IsUnspecified()
	case di == nil || li == nil || di.IsUnspecified() || li.IsUnspecified():
		return true // a name, or any address: nothing to compare
	default:
		return di.Equal(li)
	}
}

func splitHostPort(addr string) (string, string, error) { return net.SplitHostPort(addr) }

func parseIP(host string) net.IP { return net.ParseIP(strings.Trim(host, "[]")) }
