package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/testinfra"
)

// writeCerts writes a self-signed CA and a server certificate for
// 127.0.0.1 it signed into dir: ca.pem, server.pem, server.key.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, kind string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rune test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write("ca.pem", "CERTIFICATE", caDER)
	write("server.pem", "CERTIFICATE", srvDER)
	write("server.key", "EC PRIVATE KEY", keyDER)
}

// rediss:// works as docs/operations.md says: a private Redis with TLS only
// (a certificate of a self-signed CA), a worker and rune start --wait
// trusting that CA through SSL_CERT_FILE; without it, the certificate is
// refused.
func TestRedisTLS(t *testing.T) {
	t.Parallel()
	testinfra.RequireCommand(t, "redis-server")
	dir := t.TempDir()
	writeCerts(t, dir)
	port := freePort(t)
	redis := exec.Command("redis-server", "--port", "0", "--tls-port", port, "--bind", "127.0.0.1",
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir)
	var out testinfra.Buffer
	redis.Stdout, redis.Stderr = &out, &out
	if err := redis.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = redis.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = redis.Process.Kill()
		<-exited
	})
	waitFor(t, 30*time.Second, "Redis with TLS to listen", func() bool {
		select {
		case <-exited:
			testinfra.Unavailable(t, "redis-server with --tls-port did not start (built without TLS?):\n%s", out.String())
		default:
		}
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	c := newCluster(t, "")
	redisURL := "rediss://127.0.0.1:" + port + "/0"
	args := []string{"--amqp", c.amqpURL, "--redis", redisURL, "--prefix", c.prefix}
	trust := []string{"SSL_CERT_FILE=" + filepath.Join(dir, "ca.pem")}
	w := startProcEnv(t, "worker", trust, append([]string{"worker"}, args...)...)
	w.waitLog(t, "worker started", 30*time.Second)

	stdout, stderr, code := runCLIEnv(t, 60*time.Second, trust, append([]string{"start", "../examples/hello.json",
		"--input", "@../examples/hello.input.json", "--wait", "--json", "--quiet"}, args...)...)
	if code != 0 || !strings.Contains(stdout, `"status": "completed"`) {
		t.Fatalf("rune start over rediss://: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	_, stderr, code = runCLI(t, 60*time.Second, append([]string{"start", "../examples/hello.json"}, args...)...)
	if code == 0 || !strings.Contains(stderr, "certificate") {
		t.Errorf("without the CA: exit %d, stderr %q; want a certificate error", code, stderr)
	}
}

// testAMQPS: amqps:// works as docs/operations.md says, on the private
// RabbitMQ node of TestFaultBrokerRestart (its TLS listener has a
// certificate of a self-signed CA). A worker given the CA in its URL
// (cacertfile=) and `rune start --wait` given it through SSL_CERT_FILE run
// a workflow over TLS only; without the CA the certificate is refused.
func testAMQPS(t *testing.T, node *privateRabbit) {
	c := newClusterOn(t, node.url, "") // the prefix and its cleanup
	ca := filepath.Join(node.dir, "ca.pem")
	rest := []string{"--redis", c.redisURL, "--prefix", c.prefix}
	w := startProc(t, "worker over amqps", append([]string{"worker", "--amqp", node.tlsURL + "?cacertfile=" + url.QueryEscape(ca)}, rest...)...)
	w.waitLog(t, "worker started", 60*time.Second)

	start := append([]string{"start", "../examples/hello.json", "--input", "@../examples/hello.input.json", "--amqp", node.tlsURL}, rest...)
	stdout, stderr, code := runCLIEnv(t, 60*time.Second, []string{"SSL_CERT_FILE=" + ca}, append(start, "--wait", "--json", "--quiet")...)
	if code != 0 || !strings.Contains(stdout, `"status": "completed"`) {
		t.Fatalf("rune start --wait over amqps://: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	_, stderr, code = runCLI(t, 60*time.Second, start...)
	if code == 0 || !strings.Contains(stderr, "certificate") {
		t.Errorf("amqps:// without the CA: exit %d, stderr %q; want a certificate error", code, stderr)
	}
}
