// Package e2e runs Plinth's real binaries as separate processes: coordinator clusters
// on loopback, and (as root) whole lab sites in network namespaces.
package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/runpid"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/pki"
)

var binDir string

func TestMain(m *testing.M) {
	// A run that was killed left its labs up, holding the networks every lab test
	// uses: take them down first.
	reaped, err := lab.ReapOrphans(context.Background(), filepath.Join(os.TempDir(), labDirPrefix+"*"))
	for _, d := range reaped {
		fmt.Fprintf(os.Stderr, "took down %s, a lab left by a test run that has ended\n", d)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	removeEndedRunsBinaries()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", binDirPrefix, os.Getpid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	for _, b := range builds() {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binDirPrefix starts the name of each run's binary directory, then its pid.
const binDirPrefix = "plinth-e2e-bin-"

// removeEndedRunsBinaries removes the binary directories (about 100 MB each) that
// killed runs never removed.
func removeEndedRunsBinaries() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, d := range dirs {
		if _, ended := runpid.Ended(filepath.Base(d), binDirPrefix); ended {
			_ = os.RemoveAll(d)
		}
	}
}

var portMu sync.Mutex

// freeBase finds n consecutive free TCP and UDP ports on 127.0.0.1.
func freeBase(t *testing.T, n int) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for range 200 {
		// Below the kernel's ephemeral range (32768+): a restarted process must get its
		// port back, and an outgoing connection may hold any free ephemeral port.
		base := 20000 + rand.IntN(12000)
		ok := true
		for p := base; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			l.Close()
			u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			u.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

// labDirPrefix starts the name of every test lab's directory (TestMain reaps them).
const labDirPrefix = "plinth-e2e-lab-"

// newLab makes a lab whose logs are printed if the test fails.
func newLab(t *testing.T) *lab.Lab {
	t.Helper()
	dir, err := os.MkdirTemp("", labDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	l := lab.New(dir, binDir, fmt.Sprintf("pe%d", rand.IntN(1e6)))
	if err := l.OwnedByThisProcess(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Down(context.Background())
		if t.Failed() {
			dumpLogs(t, filepath.Join(dir, "logs"))
			if os.Getenv("PLINTH_E2E_KEEP") != "" {
				t.Logf("kept %s", dir)
				return
			}
		}
		os.RemoveAll(dir)
	})
	return l
}

func dumpLogs(t *testing.T, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		lines := strings.Split(string(b), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("==== %s (tail)\n%s", e.Name(), strings.Join(lines, "\n"))
	}
}

func builds() []struct{ out, pkg string } {
	// Agents run from the bundle's package, installed on booted hosts.
	return []struct{ out, pkg string }{{"plinth-coordinator", "./cmd/coordinator"}, {"runc-lab", "./cmd/runc-lab"}}
}

// enrolAs presents token at c's join port as host name and returns an API client
// with the agent identity it was issued (the key is made here, as an agent would).
func enrolAs(ctx context.Context, c *lab.Coordinator, name, token string) (*client.Client, error) {
	tok, err := pki.ParseToken(strings.TrimSpace(token))
	if err != nil {
		return nil, err
	}
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	resp, err := client.Enroll(ctx, []string{c.JoinAddr()}, tok, key, name, nil)
	if err != nil {
		return nil, err
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return nil, err
	}
	tc, err := pki.Bundle{CAPEM: []byte(resp.CA), CertPEM: []byte(resp.Cert), KeyPEM: keyPEM}.ClientTLS("")
	if err != nil {
		return nil, err
	}
	return client.New([]string{c.APIAddr()}, tc), nil
}

// enrolAgent creates a token for name with the lab's CLI and enrols with it.
func enrolAgent(t *testing.T, ctx context.Context, l *lab.Lab, c *lab.Coordinator, name string) *client.Client {
	t.Helper()
	out, err := l.CLI(ctx, "node", "enroll", name, "--role", "controller")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := enrolAs(ctx, c, name, out)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// oneCoordinator starts a lab with a single coordinator c0 on loopback and, when
// yaml is not empty, applies it; it returns the lab, c0 and an admin client.
func oneCoordinator(t *testing.T, ctx context.Context, yaml string) (*lab.Lab, *lab.Coordinator, *client.Client) {
	t.Helper()
	l := newLab(t)
	c0, err := l.InitCoordinator(ctx, "c0", "", "127.0.0.1", freeBase(t, 4), "lab")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := l.Client()
	if err != nil {
		t.Fatal(err)
	}
	if yaml != "" {
		if err := applyYAML(t, ctx, admin, yaml); err != nil {
			t.Fatal(err)
		}
	}
	return l, c0, admin
}

// bundleCache is where the lab tests unpack the site bundle (once per version).
var bundleCache = filepath.Join(os.TempDir(), "plinth-e2e-bundle")

// pruneBundles removes everything but keep from bundleCache: other versions' bundles
// and what killed unpacks left, so the cache holds one version (about 0.5 GB), not
// one per commit ever tested.
func pruneBundles(t *testing.T, keep string) {
	t.Helper()
	entries, _ := os.ReadDir(bundleCache)
	for _, e := range entries {
		if p := filepath.Join(bundleCache, e.Name()); p != keep {
			if err := os.RemoveAll(p); err != nil {
				t.Logf("prune old bundle: %v", err)
			}
		}
	}
}

// siteBundle is the site bundle the booted-host tests install from: $PLINTH_BUNDLE,
// else the newest dist/plinth-bundle-*.tar (make test builds it first).
func siteBundle(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("PLINTH_BUNDLE"); b != "" {
		return b
	}
	matches, _ := filepath.Glob("../../dist/plinth-bundle-*.tar")
	var newest string
	var at time.Time
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.ModTime().After(at) {
			newest, at = m, st.ModTime()
		}
	}
	if newest == "" {
		t.Skip("no site bundle: run `make bundle` (make test does) or set PLINTH_BUNDLE")
	}
	abs, err := filepath.Abs(newest)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// testLog writes progress lines to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
