package nodeauth

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// The handshake's frames: the magic, a kind, the body's length (uint32, big
// endian), and the body, a sequence of fields each prefixed by its length
// (uint16). The magic lets a node tell a peer of another kind (gRPC without
// the handshake, TLS) from a snapflow node at the first bytes.
const (
	magic        = "SNFA"
	kindHello    = 'H'
	kindServer   = 'S'
	kindClient   = 'C'
	kindVerdict  = 'V' // the server's verdict: empty body if accepted, else why not
	maxFrameBody = 4 << 10
)

// writeFrame writes one frame of kind holding fields.
func writeFrame(w io.Writer, kind byte, fields ...[]byte) error {
	b := make([]byte, 0, 64)
	b = append(b, magic...)
	b = append(b, kind, 0, 0, 0, 0)
	for _, f := range fields {
		b = binary.BigEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	binary.BigEndian.PutUint32(b[len(magic)+1:], uint32(len(b)-len(magic)-5))
	_, err := w.Write(b)
	return err
}

// NotHandshake is the error of a peer whose first bytes are not a frame
// of the handshake; Guess says what they look like.
type NotHandshake struct{ Guess string }

// Error says what the peer's first bytes look like.
func (e *NotHandshake) Error() string { return "nodeauth: the peer " + e.Guess }

// readFrame reads one frame of kind and returns its n fields.
func readFrame(r *bufio.Reader, kind byte, n int) ([][]byte, error) {
	head, err := r.Peek(len(magic) + 5)
	if err != nil {
		if len(head) > 0 && string(head) != magic[:min(len(head), len(magic))] {
			return nil, &NotHandshake{Guess: guess(head)}
		}
		return nil, fmt.Errorf("nodeauth: the peer closed the handshake: %w", err)
	}
	if string(head[:len(magic)]) != magic {
		return nil, &NotHandshake{Guess: guess(head)}
	}
	if head[len(magic)] != kind {
		return nil, fmt.Errorf("%w: frame %q, want %q", ErrMalformed, head[len(magic)], kind)
	}
	size := binary.BigEndian.Uint32(head[len(magic)+1:])
	if size > maxFrameBody {
		return nil, fmt.Errorf("%w: a frame of %d bytes", ErrMalformed, size)
	}
	if _, err := r.Discard(len(head)); err != nil {
		return nil, err
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("nodeauth: the peer closed the handshake: %w", err)
	}
	return parseFields(body, n)
}

func parseFields(body []byte, n int) ([][]byte, error) {
	out := make([][]byte, 0, n)
	for len(body) > 0 {
		if len(body) < 2 {
			return nil, ErrMalformed
		}
		l := int(binary.BigEndian.Uint16(body))
		if len(body) < 2+l {
			return nil, ErrMalformed
		}
		out, body = append(out, body[2:2+l]), body[2+l:]
	}
	if len(out) != n {
		return nil, fmt.Errorf("%w: %d fields, want %d", ErrMalformed, len(out), n)
	}
	return out, nil
}

// guess names what a peer that does not speak the handshake speaks, from
// its first bytes.
func guess(b []byte) string {
	switch {
	case len(b) >= 2 && (b[0] == 0x16 || b[0] == 0x15) && b[1] == 0x03:
		return "speaks TLS (TLS mismatch: this node has no TLS configured, the peer has)"
	case strings.HasPrefix("PRI * HTTP/2.0", string(b[:min(len(b), 14)])):
		return "speaks gRPC without snapflow's node handshake (not a snapflow node, or one of an older version)"
	}
	return "does not speak snapflow's node handshake (not a snapflow node)"
}

func jobs(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

func joinJobs(j []string) []byte { return []byte(strings.Join(j, "\x00")) }

func (h *Hello) write(w io.Writer) error {
	return writeFrame(w, kindHello, h.Nonce, h.Key, joinJobs(h.Jobs))
}

func readHello(r *bufio.Reader) (*Hello, error) {
	f, err := readFrame(r, kindHello, 3)
	if err != nil {
		return nil, err
	}
	return &Hello{Nonce: f[0], Key: f[1], Jobs: jobs(f[2])}, nil
}

func (p *ServerProof) write(w io.Writer) error {
	return writeFrame(w, kindServer, p.Nonce, p.Key, []byte(p.Address), joinJobs(p.Jobs), p.MAC, p.Sig)
}

func readServerProof(r *bufio.Reader) (*ServerProof, error) {
	f, err := readFrame(r, kindServer, 6)
	if err != nil {
		return nil, err
	}
	return &ServerProof{Nonce: f[0], Key: f[1], Address: string(f[2]), Jobs: jobs(f[3]), MAC: f[4], Sig: f[5]}, nil
}

func (p *ClientProof) write(w io.Writer) error { return writeFrame(w, kindClient, p.MAC, p.Sig) }

func readClientProof(r *bufio.Reader) (*ClientProof, error) {
	f, err := readFrame(r, kindClient, 2)
	if err != nil {
		return nil, err
	}
	return &ClientProof{MAC: f[0], Sig: f[1]}, nil
}
