package nodeauth

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
)

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// handshakeOver runs the credentials' two sides over a real TCP connection
// and returns the client's error and the server's refusals.
func handshakeOver(t *testing.T, client, server Config, dialled func(addr string) string) (error, []Refusal) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var refused []Refusal
	server.Refused = func(r Refusal) { mu.Lock(); refused = append(refused, r); mu.Unlock() }
	server.Address = l.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		if conn, _, err := Credentials(server).ServerHandshake(c); err == nil {
			conn.Close()
		}
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, ai, err := Credentials(client).ClientHandshake(context.Background(), dialled(l.Addr().String()), raw)
	if err == nil {
		if got := ai.(AuthInfo).Peer.ID; got != server.Identity.ID {
			t.Errorf("the client authenticated %s, want %s", got, server.Identity.ID)
		}
		conn.Close()
	} else {
		raw.Close()
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	return err, refused
}

// TestCredentialsOverTCP: the handshake completes between nodes of one
// cluster; a client with another secret is refused by both sides, and the
// server says why.
func TestCredentialsOverTCP(t *testing.T) {
	same := func(a string) string { return a }
	w, c := Config{Local: local(t, testSecret, 1, "", "job")}, Config{Local: local(t, testSecret, 2, "", "job")}
	if err, refused := handshakeOver(t, w, c, same); err != nil || len(refused) != 0 {
		t.Fatalf("one cluster: %v, refusals %v", err, refused)
	}
	other := Config{Local: local(t, otherSecret, 3, "", "job")}
	err, refused := handshakeOver(t, other, c, same)
	if !errors.Is(err, ErrSecret) || len(refused) != 1 || !strings.Contains(refused[0].Reason, "before proving the secret") {
		t.Fatalf("another secret: client %v, refusals %v", err, refused)
	}
}

// TestCredentialsRefuseGRPC: a client that sends gRPC's preface without
// the handshake is refused and told apart.
func TestCredentialsRefuseGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan Refusal, 1)
	server := Config{Local: local(t, testSecret, 2, l.Addr().String(), "job"), Refused: func(r Refusal) { got <- r }}
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _, _ = Credentials(server).ServerHandshake(c)
		}
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if r := <-got; !strings.Contains(r.Reason, "speaks gRPC without snapflow's node handshake") {
		t.Fatalf("refusal: %+v", r)
	}
}
