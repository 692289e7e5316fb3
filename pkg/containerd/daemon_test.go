package containerd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// testDaemon is Debian's containerd run with the config Plinth writes, everything
// (root, state, socket, certs.d, CNI dirs) under a temp dir, inside a private mount
// namespace with a tmpfs on /run/containerd so shim and runc state stay private.
type testDaemon struct {
	t     *testing.T
	dir   string
	paths Paths
	log   string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	restarts int
}

// newTestDaemon prepares a daemon; the config step's restart starts it. It skips
// unless the machine can run one.
func newTestDaemon(t *testing.T) *testDaemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd in a private mount namespace")
	}
	for _, bin := range []string{"containerd", "runc", "unshare"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s (scripts/install-deps.sh installs Debian's containerd and runc): %v", bin, err)
		}
	}
	// The tmpfs needs a mount point; create it on the host only if missing.
	if _, err := os.Stat("/run/containerd"); os.IsNotExist(err) {
		if err := os.Mkdir("/run/containerd", 0o711); err != nil {
			t.Skipf("cannot create /run/containerd: %v", err)
		}
		t.Cleanup(func() { os.Remove("/run/containerd") })
	}
	dir, err := os.MkdirTemp("", "plinth-ctrd-") // short: the socket path is limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{t: t, dir: dir, log: filepath.Join(dir, "containerd.log")}
	d.paths = Paths{
		ConfigPath: filepath.Join(dir, "etc", "config.toml"),
		CertsDir:   filepath.Join(dir, "etc", "certs.d"),
		Root:       filepath.Join(dir, "root"),
		State:      filepath.Join(dir, "state"),
		Address:    filepath.Join(dir, "containerd.sock"),
		CNIBinDir:  filepath.Join(dir, "cni", "bin"),
		CNIConfDir: filepath.Join(dir, "cni", "net.d"),
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			if b, err := os.ReadFile(d.log); err == nil {
				t.Logf("containerd log (last 3000 bytes):\n%s", tail(b, 3000))
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	return d
}

// restart is the step's restart function: stop the daemon if it runs, start it again.
func (d *testDaemon) restart(ctx context.Context) error {
	d.stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	logf, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs -o mode=0711 tmpfs /run/containerd && exec containerd --config "$1"`, "sh", d.paths.ConfigPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	// unshare and sh exec into containerd, so this is the daemon's PID; it dies with us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	d.cmd, d.done = cmd, done
	d.restarts++
	return nil
}

// stop ends the daemon (SIGTERM, then SIGKILL after 10 s); its namespace and tmpfs go with it.
func (d *testDaemon) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	d.cmd = nil
}

func (d *testDaemon) restartCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.restarts
}

func (d *testDaemon) options() []Option {
	log := slog.New(slog.NewTextHandler(testWriter{d.t}, nil))
	return []Option{WithPaths(d.paths), WithRestart(d.restart), WithReadyTimeout(20 * time.Second), WithLogger(log)}
}

// testWriter sends the drivers' logs to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// cri connects to the daemon's CRI.
func (d *testDaemon) cri() (runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient) {
	d.t.Helper()
	conn, err := grpc.NewClient("unix://"+d.paths.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn), runtimeapi.NewImageServiceClient(conn)
}

// imageTags lists every tag the CRI reports, image by image.
func imageTags(ctx context.Context, is runtimeapi.ImageServiceClient) (map[string]string, error) {
	resp, err := is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for _, img := range resp.Images {
		for _, tag := range img.RepoTags {
			tags[tag] = img.Id
		}
	}
	return tags, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// contextFor returns a context that ends before the test's deadline.
func contextFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}
