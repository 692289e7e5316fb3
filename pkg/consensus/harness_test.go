package consensus

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/plinth-dev/plinth/internal/logbuf"
	"github.com/plinth-dev/plinth/internal/poll"
)

// --- PKI ---

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

var serial atomic.Int64

func nextSerial() *big.Int { return big.NewInt(serial.Add(1)) }

func newCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns a node certificate usable as both TLS server and client.
func (ca *testCA) issue(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func tlsConfig(cert tls.Certificate, trust *x509.CertPool) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      trust,
		ClientCAs:    trust,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

// --- FSM ---

// listFSM is an append-only list of strings. Commands starting with "fail:"
// are rejected with an error response.
type listFSM struct {
	mu       sync.Mutex
	items    []string
	restores int
}

func (f *listFSM) Apply(l *raft.Log) any {
	s := string(l.Data)
	if strings.HasPrefix(s, "fail:") {
		return errors.New("rejected: " + s)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = append(f.items, s)
	return len(f.items)
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &listSnapshot{items: slices.Clone(f.items)}, nil
}

func (f *listFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var items []string
	if err := json.NewDecoder(rc).Decode(&items); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = items
	f.restores++
	return nil
}

func (f *listFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.items)
}

func (f *listFSM) restoreCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restores
}

type listSnapshot struct{ items []string }

func (s *listSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s.items); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *listSnapshot) Release() {}

// --- logging ---

// --- harness ---

type harness struct {
	t    *testing.T
	ca   *testCA
	logs *logbuf.Buffer
	log  *slog.Logger
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	logs := &logbuf.Buffer{}
	h := &harness{
		t:    t,
		ca:   newCA(t, "plinth-test-ca"),
		logs: logs,
		log:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	t.Cleanup(func() {
		if t.Failed() {
			out := logs.String()
			if len(out) > 200_000 {
				out = "...\n" + out[len(out)-200_000:]
			}
			t.Logf("logs:\n%s", out)
		}
	})
	return h
}

type testNode struct {
	*Node
	cfg Config
	fsm *listFSM
}

// config returns a fast-timing config for id in its own temp dir.
func (h *harness) config(id string) Config {
	return Config{
		NodeID:             id,
		BindAddr:           "127.0.0.1:0",
		DataDir:            filepath.Join(h.t.TempDir(), id),
		TLS:                tlsConfig(h.ca.issue(h.t, id), h.ca.pool),
		Logger:             h.log,
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond,
		CommitTimeout:      20 * time.Millisecond,
	}
}

// open starts a node from cfg with a fresh FSM; it is closed at cleanup.
func (h *harness) open(cfg Config) *testNode {
	h.t.Helper()
	fsm := &listFSM{}
	cfg.FSM = fsm
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := Open(ctx, cfg)
	if err != nil {
		h.t.Fatalf("open %s: %v", cfg.NodeID, err)
	}
	h.t.Cleanup(func() { _ = n.Close() })
	// Pin the address so the node can restart at the same place.
	cfg.BindAddr = n.Addr()
	return &testNode{Node: n, cfg: cfg, fsm: fsm}
}

// reopen restarts a closed node from its DataDir at the same address.
func (h *harness) reopen(tn *testNode) *testNode {
	h.t.Helper()
	return h.open(tn.cfg)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitLeader returns the single leader among nodes.
func waitLeader(t *testing.T, nodes ...*testNode) *testNode {
	t.Helper()
	var leader *testNode
	poll.True(t, 10*time.Second, "a leader", func() bool {
		leader = nil
		for _, n := range nodes {
			if n.IsLeader() {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		return leader != nil
	})
	return leader
}

// bootstrap makes tn a single-node cluster and waits for it to lead.
func bootstrap(t *testing.T, tn *testNode) {
	t.Helper()
	if err := tn.Bootstrap(); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	waitLeader(t, tn)
}

func mustApply(t *testing.T, n *testNode, cmd string) uint64 {
	t.Helper()
	_, idx, err := n.Apply(ctxT(t, 5*time.Second), []byte(cmd))
	if err != nil {
		t.Fatalf("apply %q on %s: %v", cmd, n.ID(), err)
	}
	return idx
}

// waitList waits until n's FSM holds exactly want.
func waitList(t *testing.T, n *testNode, want []string) {
	t.Helper()
	poll.True(t, 10*time.Second, n.ID()+" FSM to converge", func() bool {
		return slices.Equal(n.fsm.list(), want)
	})
}
