package pki

import (
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type handshakeResult struct {
	server    tls.ConnectionState // the server's view, when its handshake succeeded
	client    tls.ConnectionState
	serverErr error
	clientErr error
}

// handshake runs one TLS connection over loopback. The server writes a byte after
// its handshake so the client learns whether its certificate was accepted (in TLS 1.3
// the client's handshake returns before the server has checked it).
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) handshakeResult {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type srv struct {
		cs  tls.ConnectionState
		err error
	}
	done := make(chan srv, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- srv{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, serverCfg)
		if err := tc.Handshake(); err != nil {
			done <- srv{err: err}
			return
		}
		_, err = tc.Write([]byte{1})
		done <- srv{cs: tc.ConnectionState(), err: err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, clientCfg)
	var r handshakeResult
	r.clientErr = tc.Handshake()
	if r.clientErr == nil {
		_, r.clientErr = io.ReadFull(tc, make([]byte, 1))
		r.client = tc.ConnectionState()
	}
	c.Close()
	s := <-done
	r.server, r.serverErr = s.cs, s.err
	return r
}

type tlsFixture struct {
	ca          *CA
	coordinator Bundle
	agent       Bundle
	admin       Bundle
}

func newTLSFixture(t *testing.T) tlsFixture {
	ca := newTestCA(t, "lab", time.Now())
	return tlsFixture{
		ca:          ca,
		coordinator: issueBundle(t, ca, "ctl-1", RoleCoordinator, []net.IP{net.ParseIP("127.0.0.1")}, []string{"ctl-1.lab"}),
		agent:       issueBundle(t, ca, "compute-7", RoleAgent, nil, nil),
		admin:       issueBundle(t, ca, "alice", RoleAdmin, nil, nil),
	}
}

func mustServer(t *testing.T, b Bundle, verify func(Identity) error) *tls.Config {
	t.Helper()
	c, err := b.ServerTLS(verify)
	if err != nil {
		t.Fatalf("ServerTLS: %v", err)
	}
	return c
}

func mustClient(t *testing.T, b Bundle, serverName string) *tls.Config {
	t.Helper()
	c, err := b.ClientTLS(serverName)
	if err != nil {
		t.Fatalf("ClientTLS: %v", err)
	}
	return c
}

func TestMTLSHandshake(t *testing.T) {
	f := newTLSFixture(t)
	for _, serverName := range []string{"ctl-1.lab", "127.0.0.1"} {
		r := handshake(t, mustServer(t, f.coordinator, nil), mustClient(t, f.agent, serverName))
		if r.serverErr != nil || r.clientErr != nil {
			t.Fatalf("%s: server %v, client %v", serverName, r.serverErr, r.clientErr)
		}
		if r.server.Version != tls.VersionTLS13 {
			t.Errorf("version %x", r.server.Version)
		}
		if id, err := PeerIdentity(&r.server); err != nil || id.Name != "compute-7" || id.Role != RoleAgent {
			t.Errorf("server sees %+v, %v", id, err)
		}
		if id, err := PeerIdentity(&r.client); err != nil || id.Name != "ctl-1" || id.Role != RoleCoordinator {
			t.Errorf("client sees %+v, %v", id, err)
		}
	}
	// Coordinators talk to each other (Raft) with the same configs.
	peer := issueBundle(t, f.ca, "ctl-2", RoleCoordinator, nil, []string{"ctl-2.lab"})
	r := handshake(t, mustServer(t, peer, RequireRole(RoleCoordinator)), mustClient(t, f.coordinator, "ctl-2.lab"))
	if r.serverErr != nil || r.clientErr != nil {
		t.Fatalf("coordinator peers: server %v, client %v", r.serverErr, r.clientErr)
	}
}

// A client config resumes its session on the next connection, and the server sees
// the same identity and still runs its check; a renewed certificate (a new config)
// starts a session of its own, under its own serial.
func TestMTLSResumption(t *testing.T) {
	f := newTLSFixture(t)
	checked := 0
	srv := mustServer(t, f.coordinator, func(Identity) error { checked++; return nil })
	cl := mustClient(t, f.agent, "ctl-1.lab")
	first := handshake(t, srv, cl)
	second := handshake(t, srv, cl)
	if first.serverErr != nil || second.serverErr != nil || second.clientErr != nil {
		t.Fatalf("server %v / %v, client %v", first.serverErr, second.serverErr, second.clientErr)
	}
	if first.server.DidResume || !second.server.DidResume {
		t.Fatalf("resumed: first %v, second %v; want only the second", first.server.DidResume, second.server.DidResume)
	}
	a, _ := PeerIdentity(&first.server)
	b, err := PeerIdentity(&second.server)
	if err != nil || b != a {
		t.Fatalf("resumed identity %+v (%v), first %+v", b, err, a)
	}
	if checked != 2 {
		t.Fatalf("server check ran %d times, want once per connection", checked)
	}
	// A refusing check refuses a resumed session too.
	refuse := mustServer(t, f.coordinator, RequireRole(RoleAdmin))
	refuse.SetSessionTicketKeys([][32]byte{{1}})
	srv.SetSessionTicketKeys([][32]byte{{1}})
	_ = handshake(t, srv, cl) // a ticket under the shared key
	resumed, check := false, refuse.VerifyConnection
	refuse.VerifyConnection = func(cs tls.ConnectionState) error { resumed = cs.DidResume; return check(cs) }
	if r := handshake(t, refuse, cl); r.serverErr == nil || !resumed {
		t.Fatalf("agent's resumed session: server err %v, resumed %v; want a resumption refused", r.serverErr, resumed)
	}
	renewed := issueBundle(t, f.ca, "compute-7", RoleAgent, nil, nil)
	r := handshake(t, srv, mustClient(t, renewed, "ctl-1.lab"))
	if r.serverErr != nil || r.server.DidResume {
		t.Fatalf("renewed certificate: err %v, resumed %v; want a full handshake", r.serverErr, r.server.DidResume)
	}
	if id, _ := PeerIdentity(&r.server); id.Serial == a.Serial {
		t.Fatalf("server sees the old serial %s after renewal", a.Serial)
	}
}

func TestMTLSRefusals(t *testing.T) {
	f := newTLSFixture(t)
	foreign := issueBundle(t, newTestCA(t, "lab", time.Now()), "compute-7", RoleAgent, nil, nil)

	noCert := mustClient(t, f.agent, "ctl-1.lab")
	noCert.Certificates = nil

	foreignClient := mustClient(t, f.agent, "ctl-1.lab")
	foreignClient.Certificates = mustClient(t, foreign, "ctl-1.lab").Certificates

	for name, tc := range map[string]struct {
		server *tls.Config
		client *tls.Config
		want   string // in the server's error, when the server refuses
	}{
		"client cert from another CA": {mustServer(t, f.coordinator, nil), foreignClient, "certificate"},
		"client without a cert":       {mustServer(t, f.coordinator, nil), noCert, "certificate"},
		"verify rejects the role":     {mustServer(t, f.coordinator, RequireRole(RoleAdmin)), mustClient(t, f.agent, "ctl-1.lab"), "not allowed"},
		"wrong server name":           {mustServer(t, f.coordinator, nil), mustClient(t, f.agent, "ctl-9.lab"), ""},
		// An agent certificate may serve TLS, but ClientTLS only trusts coordinators.
		"server is not a coordinator": {mustServer(t, issueBundle(t, f.ca, "compute-8", RoleAgent, nil, []string{"ctl-1.lab"}), nil), mustClient(t, f.agent, "ctl-1.lab"), ""},
		// Admins cannot serve at all: no server auth usage.
		"server is an admin": {mustServer(t, issueBundle(t, f.ca, "bob", RoleAdmin, nil, []string{"ctl-1.lab"}), nil), mustClient(t, f.agent, "ctl-1.lab"), ""},
		// The server must be from the client's CA too.
		"server from another CA": {mustServer(t, issueBundle(t, newTestCA(t, "lab", time.Now()), "ctl-1", RoleCoordinator, nil, []string{"ctl-1.lab"}), nil), mustClient(t, f.agent, "ctl-1.lab"), ""},
	} {
		t.Run(name, func(t *testing.T) {
			r := handshake(t, tc.server, tc.client)
			t.Logf("server: %v; client: %v", r.serverErr, r.clientErr)
			if r.serverErr == nil || r.clientErr == nil {
				t.Fatalf("handshake not refused: server %v, client %v", r.serverErr, r.clientErr)
			}
			if tc.want != "" && !strings.Contains(r.serverErr.Error(), tc.want) {
				t.Errorf("server error %q, want %q", r.serverErr, tc.want)
			}
		})
	}

	// ClientTLSVerify lets a caller accept other server roles deliberately.
	agentSrv := issueBundle(t, f.ca, "compute-8", RoleAgent, nil, []string{"compute-8.lab"})
	cfg, err := f.coordinator.ClientTLSVerify("compute-8.lab", RequireRole(RoleAgent))
	if err != nil {
		t.Fatal(err)
	}
	if r := handshake(t, mustServer(t, agentSrv, RequireRole(RoleCoordinator)), cfg); r.serverErr != nil || r.clientErr != nil {
		t.Errorf("coordinator to agent: server %v, client %v", r.serverErr, r.clientErr)
	}
}

func TestJoinTLS(t *testing.T) {
	f := newTLSFixture(t)
	srv, err := f.coordinator.JoinServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	good, err := JoinClientTLS("ctl-1.lab", f.ca.Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	if r := handshake(t, srv, good); r.serverErr != nil || r.clientErr != nil {
		t.Fatalf("join: server %v, client %v", r.serverErr, r.clientErr)
	}

	wrongPin, _ := JoinClientTLS("ctl-1.lab", newTestCA(t, "lab", time.Now()).Fingerprint())
	if r := handshake(t, srv, wrongPin); r.clientErr == nil || !strings.Contains(r.clientErr.Error(), "pinned CA") {
		t.Errorf("wrong pin: client %v", r.clientErr)
	}
	wrongName, _ := JoinClientTLS("ctl-9.lab", f.ca.Fingerprint())
	if r := handshake(t, srv, wrongName); r.clientErr == nil {
		t.Error("wrong server name accepted")
	}
	// A host of the right CA that is not a coordinator cannot pose as one.
	agentSrv, _ := issueBundle(t, f.ca, "compute-8", RoleAgent, nil, []string{"ctl-1.lab"}).JoinServerTLS()
	if r := handshake(t, agentSrv, good); r.clientErr == nil {
		t.Error("agent accepted as join server")
	}
	// The ordinary API listener refuses a host without a certificate.
	if r := handshake(t, mustServer(t, f.coordinator, nil), good); r.serverErr == nil {
		t.Error("ServerTLS accepted a joining host without a certificate")
	}
	for _, fp := range []string{"", "sha256:abc", "md5:" + strings.Repeat("0", 64)} {
		if _, err := JoinClientTLS("ctl-1.lab", fp); err == nil {
			t.Errorf("fingerprint %q accepted", fp)
		}
	}
}

func TestBundleInvalid(t *testing.T) {
	f := newTLSFixture(t)
	other := newTestCA(t, "lab", time.Now())
	mixed := f.agent
	mixed.CAPEM = other.CertPEM
	swapped := f.agent
	swapped.KeyPEM = f.admin.KeyPEM
	for name, b := range map[string]Bundle{
		"cert from another CA": mixed,
		"key of another cert":  swapped,
		"empty":                {},
		"leaf as CA":           {CAPEM: f.agent.CertPEM, CertPEM: f.agent.CertPEM, KeyPEM: f.agent.KeyPEM},
	} {
		if _, err := b.ServerTLS(nil); err == nil {
			t.Errorf("%s: ServerTLS accepted", name)
		}
		if _, err := b.ClientTLS("x"); err == nil {
			t.Errorf("%s: ClientTLS accepted", name)
		}
		if err := b.Save(t.TempDir(), "x"); err == nil {
			t.Errorf("%s: Save accepted", name)
		}
	}
	if id, err := f.agent.Identity(); err != nil || id.Name != "compute-7" {
		t.Errorf("Identity %+v %v", id, err)
	}
	if s := f.agent.String() + f.agent.GoString(); strings.Contains(s, "PRIVATE") || !strings.Contains(s, "compute-7") {
		t.Errorf("String %q", s)
	}
}

func TestBundleSaveLoad(t *testing.T) {
	f := newTLSFixture(t)
	dir := filepath.Join(t.TempDir(), "etc", "plinth")
	if err := f.agent.Save(dir, "agent"); err != nil {
		t.Fatal(err)
	}
	checkMode(t, dir, 0o700)
	checkMode(t, filepath.Join(dir, "ca.crt"), 0o644)
	checkMode(t, filepath.Join(dir, "agent.crt"), 0o644)
	checkMode(t, filepath.Join(dir, "agent.key"), 0o600)
	checkNoTemps(t, dir)
	got, err := LoadBundle(dir, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.CAPEM) != string(f.agent.CAPEM) || string(got.CertPEM) != string(f.agent.CertPEM) || string(got.KeyPEM) != string(f.agent.KeyPEM) {
		t.Error("bundle changed in round trip")
	}
	// Rotation replaces the files.
	rotated := issueBundle(t, f.ca, "compute-7", RoleAgent, nil, nil)
	if err := rotated.Save(dir, "agent"); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadBundle(dir, "agent"); err != nil || string(got.KeyPEM) != string(rotated.KeyPEM) {
		t.Errorf("after rotation: %v", err)
	}

	if err := os.Chmod(filepath.Join(dir, "agent.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBundle(dir, "agent"); err == nil || !strings.Contains(err.Error(), "permissions") {
		t.Errorf("0644 key: %v", err)
	}
	if _, err := LoadBundle(dir, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing bundle: %v", err)
	}
	for _, name := range []string{"ca", "../x", "", "a/b"} {
		if err := f.agent.Save(dir, name); err == nil {
			t.Errorf("Save name %q accepted", name)
		}
	}
}
