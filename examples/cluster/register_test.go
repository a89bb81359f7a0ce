//go:build unix

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/dataflow"
)

// smallJob makes a coordinator's or a worker's job short: the tests here
// are about who may join, not about failures.
var smallJob = []string{"-records", "600", "-keys", "50", "-rate", "600"}

// workerArgs are the flags of a worker joining addr, giving up after
// timeout.
func (c *testCluster) workerArgs(addr, timeout string, extra ...string) []string {
	args := append([]string{"-role", "worker", "-join", addr, "-listen", "127.0.0.1:0", "-register-timeout", timeout}, c.jobFlags()...)
	return append(append(args, smallJob...), extra...)
}

// expectRefused waits for p to exit 1 and checks that its output holds
// every one of want.
func (c *testCluster) expectRefused(p *child, want ...string) {
	c.t.Helper()
	if code := c.exit(p); code != 1 {
		c.t.Errorf("%s exited %d, want 1", p.name, code)
	}
	out := p.output()
	for _, w := range want {
		if !strings.Contains(out, w) {
			c.t.Errorf("%s's output does not name %q", p.name, w)
		}
	}
}

// expectNoJob checks that the coordinator let no worker join.
func (c *testCluster) expectNoJob(coord *child) {
	c.t.Helper()
	for _, ev := range events(coord, 0) {
		c.t.Errorf("%s: event %s %v, want none while no worker may join", coord.name, ev.kind, ev.fields)
	}
}

// TestWorkerCannotRegister: a worker with no coordinator at its join
// address gives up after its register timeout, exits 1 and says which
// address it tried.
func TestWorkerCannotRegister(t *testing.T) {
	c := newTestCluster(t)
	addr := freeAddr(t)
	w := c.start("worker", c.workerArgs(addr, "1s")...)
	c.expectRefused(w, "could not register", addr)
}

// TestWorkerBadUsage: a worker without a usable join address exits 2 and
// says what is missing.
func TestWorkerBadUsage(t *testing.T) {
	c := newTestCluster(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no -join", []string{"-role", "worker"}, "-join HOST:PORT"},
		{"-join without a port", []string{"-role", "worker", "-join", "127.0.0.1"}, `-join "127.0.0.1": want host:port`},
		{"coordinator without -store", []string{"-role", "coordinator"}, "needs -store"},
		{"unknown role", []string{"-role", "observer"}, `-role "observer"`},
		{"half of the TLS flags", []string{"-role", "worker", "-join", "127.0.0.1:1", "-tls-cert", "x.pem"}, "-tls-cert, -tls-key and -tls-ca together"},
	} {
		p := c.start(tc.name, tc.args...)
		if code := c.exit(p); code != 2 {
			t.Errorf("%s: exit %d, want 2", tc.name, code)
		}
		if out := p.output(); !strings.Contains(out, tc.want) {
			t.Errorf("%s: output %q does not say %q", tc.name, out, tc.want)
		}
	}
}

// TestFingerprintRefused: a worker whose job has another topology (another
// parallelism of the sum) is refused: it exits 1 and the coordinator logs
// the refusal, both naming both fingerprints and what differs (the sum's
// parallelism, from the coordinator's to the worker's). The coordinator is not
// disturbed: a worker of the same topology then runs the job to an exact
// end.
func TestFingerprintRefused(t *testing.T) {
	c := newTestCluster(t)
	c.release()
	coord, addr := c.startCoordinator("coordinator", "127.0.0.1:0", 1, smallJob...)
	ours, theirs := fingerprint(t, 1), fingerprint(t, 2)
	bad := c.start("worker -variant 2", c.workerArgs(addr, "2m", "-variant", "2")...)
	what := fmt.Sprintf(`operator "sum": parallelism from %d to %d`, sumParallelism, sumParallelism-1)
	c.expectRefused(bad, ours, theirs, what)
	c.await(coord, 0, "the refusal in its log", func(l string) bool {
		return strings.Contains(l, "refusing a worker") && strings.Contains(l, ours) && strings.Contains(l, theirs) &&
			strings.Contains(l, strings.ReplaceAll(what, `"`, `\"`))
	})
	c.expectNoJob(coord)
	good := c.start("worker", c.workerArgs(addr, "2m", "-slots", "6")...) // every task on one worker
	c.expectExact(coord, good)
}

// TestParamsRefused: a worker given other job flags than the coordinator
// (-records) is refused at registration, both naming the parameter and
// its two values (before, it ran a job with another end, which only the
// example's own final check noticed). A worker with the same flags then
// runs the job to an exact end.
func TestParamsRefused(t *testing.T) {
	c := newTestCluster(t)
	c.release()
	coord, addr := c.startCoordinator("coordinator", "127.0.0.1:0", 1, smallJob...)
	bad := c.start("worker with -records 700", c.workerArgs(addr, "2m", "-records", "700")...)
	want := `"records" is "600" on the coordinator but "700" on worker`
	c.expectRefused(bad, want)
	c.await(coord, 0, "the refusal in its log", func(l string) bool {
		return strings.Contains(l, "refusing a worker") && strings.Contains(l, strings.ReplaceAll(want, `"`, `\"`))
	})
	c.expectNoJob(coord)
	good := c.start("worker", c.workerArgs(addr, "2m")...)
	c.expectExact(coord, good)
}

// TestWorkerSignalled: SIGTERM stops a worker, which exits 0 once it has
// cleaned up.
func TestWorkerSignalled(t *testing.T) {
	c := newTestCluster(t)
	w := c.start("worker", c.workerArgs(freeAddr(t), "2m")...)
	c.await(w, 0, "its address", func(l string) bool { return strings.HasPrefix(l, listeningPrefix) })
	if err := w.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.exit(w); code != 0 {
		t.Errorf("the worker exited %d after SIGTERM, want 0", code)
	}
	c.await(w, 0, "its log saying it stopped", func(l string) bool { return strings.Contains(l, "worker stopped by a signal") })
}

// fingerprint is the topology fingerprint of the job's variant.
func fingerprint(t *testing.T, variant int) string {
	t.Helper()
	p, err := dataflow.NewPlan(buildJob(jobParams{records: 1, keys: 1, variant: variant}))
	if err != nil {
		t.Fatal(err)
	}
	return p.Fingerprint
}

// TestTLS: with mutual TLS on the coordinator, a worker without TLS, a
// worker whose certificate another CA signed and a worker that trusts
// another CA cannot register: each exits 1 naming the coordinator's
// address and why TLS refused it (no TLS here, its certificate refused,
// the coordinator's of an unknown authority), and no job runs. A worker
// with a certificate of the cluster's CA then runs the job to an exact
// end.
func TestTLS(t *testing.T) {
	c := newTestCluster(t)
	c.release()
	ours, other := newTestCA(t, c.dir, "cluster"), newTestCA(t, c.dir, "other")
	tlsFlags := func(ca *testCA, name string) []string {
		cert, key := ca.leaf(t, c.dir, name)
		return []string{"-tls-cert", cert, "-tls-key", key, "-tls-ca", ours.certFile}
	}
	coord, addr := c.startCoordinator("coordinator", "127.0.0.1:0", 1, append(tlsFlags(ours, "coordinator"), smallJob...)...)

	plain := c.start("worker without TLS", c.workerArgs(addr, "2s")...)
	c.expectRefused(plain, "could not register", addr, "the peer speaks TLS and this node has none configured")
	rogue := c.start("worker with another CA's certificate", c.workerArgs(addr, "2s", tlsFlags(other, "rogue")...)...)
	c.expectRefused(rogue, "could not register", addr, "the peer refused this node's certificate")
	cert, key := other.leaf(t, c.dir, "stranger")
	stranger := c.start("worker trusting another CA", c.workerArgs(addr, "2s", "-tls-cert", cert, "-tls-key", key, "-tls-ca", other.certFile)...)
	c.expectRefused(stranger, "could not register", addr, "unknown authority")
	c.expectNoJob(coord)

	good := c.start("worker with TLS", c.workerArgs(addr, "2m", append(tlsFlags(ours, "worker"), "-slots", "6")...)...)
	c.expectExact(coord, good)
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	certFile string
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, certFile: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.certFile, "CERTIFICATE", der)
	return ca
}

// leaf issues a certificate for a node on 127.0.0.1, good for both ends of
// a connection, and returns its certificate and key files.
func (ca *testCA) leaf(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
