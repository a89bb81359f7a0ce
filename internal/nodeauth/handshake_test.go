package nodeauth

import (
	"bytes"
	"errors"
	"testing"
)

const (
	testSecret  = "handshake-test-secret-0123456789"
	otherSecret = "handshake-test-other-secret-9876"
)

// seeded returns a deterministic source of bytes: seed repeated.
func seeded(seed byte) *bytes.Reader { return bytes.NewReader(bytes.Repeat([]byte{seed}, 4096)) }

func identity(t *testing.T, seed byte) *Identity {
	t.Helper()
	id, err := NewIdentity(seeded(seed))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func local(t *testing.T, secret string, seed byte, addr string, jobs ...string) Local {
	return Local{Secret: secret, Identity: identity(t, seed), Address: addr, Jobs: jobs}
}

// run plays one handshake; it returns what each side proved of the other,
// or the first refusal.
func run(t *testing.T, client, server Local, dialled string, cexp, sexp []byte, nonce byte) (cp, sp Peer, err error) {
	t.Helper()
	c, hello, err := NewClient(client, dialled, cexp, seeded(nonce))
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(server, sexp)
	proof, err := s.Answer(hello, seeded(nonce+1))
	if err != nil {
		return Peer{}, Peer{}, err
	}
	cproof, cp, err := c.Verify(proof)
	if err != nil {
		return Peer{}, Peer{}, err
	}
	sp, err = s.Finish(cproof)
	return cp, sp, err
}

// TestHandshakeProvesBothSides: nodes with one secret and a shared job
// each learn the other's key id, the client the server's address.
func TestHandshakeProvesBothSides(t *testing.T) {
	w, c := local(t, testSecret, 1, "127.0.0.1:7001", "a", "b"), local(t, testSecret, 2, "127.0.0.1:7000", "b")
	cp, sp, err := run(t, w, c, "127.0.0.1:7000", nil, nil, 9)
	if err != nil {
		t.Fatal(err)
	}
	if cp.ID != c.Identity.ID || cp.Address != "127.0.0.1:7000" || sp.ID != w.Identity.ID {
		t.Fatalf("client learnt %+v, server learnt %+v; want ids %s and %s", cp, sp, c.Identity.ID, w.Identity.ID)
	}
}

// TestHandshakeRefusals: each way a handshake must fail does, with its
// sentinel, and the side that must refuse first does.
func TestHandshakeRefusals(t *testing.T) {
	w := local(t, testSecret, 1, "127.0.0.1:7001", "job")
	coord := local(t, testSecret, 2, "127.0.0.1:7000", "job")
	for _, c := range []struct {
		name           string
		client, server Local
		dialled        string
		cexp, sexp     []byte
		want           error
	}{
		{"server with another secret: the client refuses before proving", w, local(t, otherSecret, 2, "127.0.0.1:7000", "job"), "127.0.0.1:7000", nil, nil, ErrSecret},
		{"client with another secret", local(t, otherSecret, 1, "", "job"), coord, "127.0.0.1:7000", nil, nil, ErrSecret},
		{"another node answers (a relay to a worker)", w, local(t, testSecret, 3, "127.0.0.1:7002", "job"), "127.0.0.1:7000", nil, nil, ErrAddress},
		{"reflected to the client's own server", w, Local{Secret: testSecret, Identity: w.Identity, Address: "127.0.0.1:7000", Jobs: []string{"job"}}, "127.0.0.1:7000", nil, nil, ErrIdentity},
		{"no job in common", w, local(t, testSecret, 2, "127.0.0.1:7000", "other"), "127.0.0.1:7000", nil, nil, ErrJob},
		{"relayed across two TLS connections", w, coord, "", []byte("exporter of connection 1"), []byte("exporter of connection 2"), ErrSecret},
	} {
		_, _, err := run(t, c.client, c.server, c.dialled, c.cexp, c.sexp, 7)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestHandshakeReplay: a client proof captured from one handshake is
// refused by another (other nonces), and by the same one a second time; a
// server proof replayed to a new client is refused too.
func TestHandshakeReplay(t *testing.T) {
	w, coord := local(t, testSecret, 1, "127.0.0.1:7001", "job"), local(t, testSecret, 2, "127.0.0.1:7000", "job")
	c1, h1, _ := NewClient(w, "127.0.0.1:7000", nil, seeded(10))
	s1 := NewServer(coord, nil)
	p1, err := s1.Answer(h1, seeded(11))
	if err != nil {
		t.Fatal(err)
	}
	cp1, _, err := c1.Verify(p1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Finish(cp1); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Finish(cp1); !errors.Is(err, ErrReplay) {
		t.Errorf("the same proof twice: %v, want ErrReplay", err)
	}
	// An attacker replays the captured hello and proof on a new connection:
	// the server's nonce is new, the proof is not for it.
	s2 := NewServer(coord, nil)
	if _, err := s2.Answer(h1, seeded(12)); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Finish(cp1); !errors.Is(err, ErrSecret) {
		t.Errorf("a captured client proof on a new connection: %v, want ErrSecret", err)
	}
	// A listener replays a captured server proof to the next client.
	c3, _, _ := NewClient(w, "127.0.0.1:7000", nil, seeded(13))
	if _, _, err := c3.Verify(p1); !errors.Is(err, ErrSecret) {
		t.Errorf("a captured server proof to a new client: %v, want ErrSecret", err)
	}
}

func TestOwnsWorker(t *testing.T) {
	for _, c := range []struct {
		node, worker string
		want         bool
	}{
		{"ab12", WorkerID("ab12", 1), true},
		{"ab12", WorkerID("ab12", 17), true},
		{"ab12", WorkerID("cd34", 1), false},
		{"ab12", "w-ab12-", false},
		{"ab12", "w-ab12-1x", false},
		{"ab12", "w-ab123-1", false},
		{"", "w--1", false},
		{"ab12", "", false},
	} {
		if got := OwnsWorker(c.node, c.worker); got != c.want {
			t.Errorf("OwnsWorker(%q, %q) = %v, want %v", c.node, c.worker, got, c.want)
		}
	}
}

func TestSameAddress(t *testing.T) {
	for _, c := range []struct {
		dialled, listens string
		want             bool
	}{
		{"127.0.0.1:7000", "127.0.0.1:7000", true},
		{"localhost:7000", "127.0.0.1:7000", true},
		{"127.0.0.1:7000", "127.0.0.1:7001", false},
		{"coord:7000", "10.0.0.5:7000", true},
		{"127.0.0.1:7000", "0.0.0.0:7000", true},
		{"127.0.0.1:7000", "10.0.0.5:7000", false},
		{"10.0.0.6:7000", "10.0.0.5:7000", false},
		{"[::1]:7000", "127.0.0.1:7000", true},
		{"bad", "127.0.0.1:7000", false},
	} {
		if got := SameAddress(c.dialled, c.listens); got != c.want {
			t.Errorf("SameAddress(%q, %q) = %v, want %v", c.dialled, c.listens, got, c.want)
		}
	}
}

// FuzzReadFrames: no input makes the frame readers panic.
func FuzzReadFrames(f *testing.F) {
	var b bytes.Buffer
	_ = (&Hello{Nonce: make([]byte, 32), Key: make([]byte, 32), Jobs: []string{"j"}}).write(&b)
	f.Add(b.Bytes())
	f.Add([]byte("PRI * HTTP/2.0\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = readHello(bufioReader(data))
		_, _ = readServerProof(bufioReader(data))
		_, _ = readClientProof(bufioReader(data))
	})
}
