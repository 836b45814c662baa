package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// PostgreSQL sslmode as docs/operations.md says, against a private
// PostgreSQL (initdb into a temporary directory, ssl=on with a certificate
// of a self-signed CA, a port of its own, pg_hba accepting TCP connections
// over TLS only): `rune server --postgres` with sslmode=verify-full and
// sslrootcert= starts and stores and reads a workflow; sslmode=disable is
// refused by the server, verify-full without the CA by rune. A few seconds.
func TestPostgresTLS(t *testing.T) {
	t.Parallel()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		testinfra.Unavailable(t, "no /usr/lib/postgresql/*/bin/initdb")
	}
	slices.Sort(bins)
	bin := filepath.Dir(bins[len(bins)-1])
	// PostgreSQL refuses to run as root: then as the postgres OS user, in a
	// directory it owns.
	dir, err := os.MkdirTemp("", "rune-pgtls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	writeCerts(t, dir)
	var as []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			testinfra.Unavailable(t, "running as root and no postgres OS user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, f := range []string{"", "ca.pem", "server.pem", "server.key"} {
			if err := os.Chown(filepath.Join(dir, f), uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		as = []string{"runuser", "-u", "postgres", "--"}
	}
	pg := func(name string, args ...string) {
		t.Helper()
		argv := append(append(slices.Clone(as), filepath.Join(bin, name)), args...)
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
	}
	data := filepath.Join(dir, "data")
	pg("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "-N")
	port := freePort(t)
	conf := fmt.Sprintf("port = %s\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\n"+
		"ssl = on\nssl_cert_file = '%s'\nssl_key_file = '%s'\n",
		port, dir, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"))
	appendFile(t, filepath.Join(data, "postgresql.conf"), conf)
	// hostssl only: a TCP connection without TLS has no pg_hba entry.
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte("local all all trust\nhostssl all all 127.0.0.1/32 trust\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pg("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start")
	t.Cleanup(func() {
		argv := append(slices.Clone(as), filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop")
		_ = exec.Command(argv[0], argv[1:]...).Run()
	})

	c := newCluster(t, "")
	base := "postgres://postgres@127.0.0.1:" + port + "/postgres?"
	ca := filepath.Join(dir, "ca.pem")
	env := []string{"RUNE_SECRET_KEY=3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "RUNE_API_TOKEN=tls-test-token"}
	server := func(pgURL string) []string {
		return append([]string{"server", "--addr", "127.0.0.1:0", "--postgres", pgURL}, c.serverArgs()...)
	}

	srv := startProcEnv(t, "server", env, server(base+"sslmode=verify-full&sslrootcert="+url.QueryEscape(ca))...)
	srv.waitLog(t, "server listening", 60*time.Second)
	m := regexp.MustCompile(`msg="server listening" addr=(\S+)`).FindStringSubmatch(srv.stderr.String())
	if m == nil {
		t.Fatalf("no listening address in the server's log:\n%s", srv.stderr.String())
	}
	def, err := os.ReadFile("../examples/hello.json")
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path string, body []byte, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+m[1]+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer tls-test-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s over a verify-full store: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
	}
	var wf struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(def, &wf); err != nil || wf.ID == "" {
		t.Fatalf("examples/hello.json has no id: %v", err)
	}
	call("POST", "/v1/workflows", def, http.StatusCreated)
	call("GET", "/v1/workflows/"+wf.ID, nil, http.StatusOK)

	for _, refused := range []struct{ query, want string }{
		{"sslmode=disable", "no encryption"},
		{"sslmode=verify-full", "certificate"},
	} {
		_, stderr, code := runCLIEnv(t, 60*time.Second, env, server(base+refused.query)...)
		if code == 0 || !strings.Contains(stderr, refused.want) {
			t.Errorf("rune server --postgres …?%s against a server requiring TLS of a private CA: exit %d, stderr %q; want refused (%q)",
				refused.query, code, tail(stderr, 2<<10), refused.want)
		}
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
