package cephtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Stores an OSD can use.
const (
	Bluestore = "bluestore" // a sparse 10 GiB file, as on a real disk
	Memstore  = "memstore"  // in memory: lighter, for the lab
)

// Options choose where and how the cluster runs. Zero values are fine for a test.
type Options struct {
	// Store is Bluestore (default) or Memstore.
	Store string
	// IP the daemons bind; default 127.0.0.1.
	IP string
	// Port is the mon's msgr2 port; msgr1 is Port+1 and OSD/mgr use Port+10..+99.
	// 0 picks a free range on IP.
	Port int
	// Dir must not exist; default a fresh /tmp/cephXXXX. Keep it short.
	Dir string
	// Wrap prefixes every networked command (e.g. ip netns exec NS).
	Wrap []string
	// Spawn starts a long-running daemon and returns how to stop it; default a child
	// process that dies with this one.
	Spawn func(name string, argv []string) (stop func(), err error)
	// Logf receives progress lines.
	Logf func(format string, args ...any)
}

// Cluster is a running single-node cluster.
type Cluster struct {
	Dir        string
	ConfigFile string
	// Keyring holds client.admin's key.
	Keyring string
	IP      string
	Port    int
	FSID    string

	store   string
	wrap    []string
	spawn   func(string, []string) (func(), error)
	logf    func(string, ...any)
	mu      sync.Mutex
	daemons map[string]func()
	ownDir  bool
}

// Binaries the cluster needs, all from Debian's ceph-mon, ceph-mgr, ceph-osd and
// ceph-common.
var Binaries = []string{"ceph-mon", "ceph-mgr", "ceph-osd", "ceph-authtool", "monmaptool", "ceph"}

// Available says why this machine cannot run a cluster, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("cephtest: needs root (the Ceph daemons run as root here)")
	}
	var missing []string
	for _, b := range Binaries {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cephtest: %s not installed (make deps installs ceph-mon ceph-mgr ceph-osd ceph-common)", strings.Join(missing, ", "))
	}
	return nil
}

// Start creates and starts a cluster and waits until it is HEALTH_OK with its OSD
// up and in and a manager available. On error nothing is left running.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	c = &Cluster{Dir: o.Dir, IP: o.IP, Port: o.Port, store: o.Store, wrap: o.Wrap, spawn: o.Spawn, logf: o.Logf, daemons: map[string]func(){}}
	if c.IP == "" {
		c.IP = "127.0.0.1"
	}
	if c.store == "" {
		c.store = Bluestore
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if c.spawn == nil {
		c.spawn = spawnChild(c)
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("/tmp", "ceph"); err != nil {
			return nil, fmt.Errorf("cephtest: %w", err)
		}
		c.ownDir = true
	} else {
		if _, err := os.Stat(c.Dir); err == nil {
			return nil, fmt.Errorf("cephtest: %s already exists", c.Dir)
		}
		if err := os.MkdirAll(c.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("cephtest: %w", err)
		}
		c.ownDir = true
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.Port == 0 {
		if c.Port, err = freePorts(c.IP); err != nil {
			return nil, err
		}
	}
	began := time.Now()
	if err := c.create(ctx); err != nil {
		return nil, err
	}
	if err := c.waitHealthy(ctx, 90*time.Second); err != nil {
		return nil, err
	}
	c.logf("cephtest: cluster %s healthy at %s:%d in %s (%s)", c.FSID, c.IP, c.Port, time.Since(began).Round(10*time.Millisecond), c.store)
	return c, nil
}

func (c *Cluster) path(p ...string) string { return filepath.Join(append([]string{c.Dir}, p...)...) }

// create writes the configuration and keys, makes the mon's and OSD's stores, and
// starts mon, mgr and OSD, as the recipe does.
func (c *Cluster) create(ctx context.Context) error {
	for _, d := range []string{"mon", "mgr", "osd", "log", "run"} {
		if err := os.MkdirAll(c.path(d), 0o700); err != nil {
			return fmt.Errorf("cephtest: %w", err)
		}
	}
	c.FSID = uuid()
	osdUUID := uuid()
	c.ConfigFile, c.Keyring = c.path("ceph.conf"), c.path("ceph.client.admin.keyring")
	if err := os.WriteFile(c.ConfigFile, []byte(c.config()), 0o644); err != nil {
		return fmt.Errorf("cephtest: %w", err)
	}
	monKeyring, mgrKeyring := c.path("mon.keyring"), c.path("mgr", "keyring")
	steps := [][]string{
		{"ceph-authtool", "--create-keyring", monKeyring, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"},
		{"ceph-authtool", "--create-keyring", c.Keyring, "--gen-key", "-n", "client.admin",
			"--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mds", "allow *", "--cap", "mgr", "allow *"},
		{"ceph-authtool", "--create-keyring", mgrKeyring, "--gen-key", "-n", "mgr.x",
			"--cap", "mon", "allow profile mgr", "--cap", "osd", "allow *", "--cap", "mds", "allow *"},
		{"ceph-authtool", monKeyring, "--import-keyring", c.Keyring},
		{"ceph-authtool", monKeyring, "--import-keyring", mgrKeyring},
		{"monmaptool", "--create", "--fsid", c.FSID, "--addv", "a", c.monHost(), c.path("monmap")},
		{"ceph-mon", "--conf", c.ConfigFile, "--mkfs", "-i", "a", "--monmap", c.path("monmap"), "--keyring", monKeyring},
	}
	for _, s := range steps {
		if _, err := c.run(ctx, false, nil, s...); err != nil {
			return err
		}
	}
	osdSecret, err := c.run(ctx, false, nil, "ceph-authtool", "--gen-print-key")
	if err != nil {
		return err
	}
	osdSecret = strings.TrimSpace(osdSecret)
	if _, err := c.run(ctx, false, nil, "ceph-authtool", "--create-keyring", c.path("osd", "keyring"), "--name", "osd.0", "--add-key", osdSecret); err != nil {
		return err
	}
	if err := c.startDaemon("mon.a", "ceph-mon", "-i", "a"); err != nil {
		return err
	}
	if err := c.startDaemon("mgr.x", "ceph-mgr", "-i", "x"); err != nil {
		return err
	}
	// OSD mkfs needs no monitor: run it while osd.0 is registered with the mon.
	mkfs := make(chan error, 1)
	go func() {
		_, err := c.run(ctx, false, nil, "ceph-osd", "--conf", c.ConfigFile, "-i", "0", "--mkfs", "--osd-uuid", osdUUID, "--no-mon-config")
		mkfs <- err
	}()
	in, _ := json.Marshal(map[string]string{"cephx_secret": osdSecret})
	id, err := c.run(ctx, true, in, "ceph", "--conf", c.ConfigFile, "--connect-timeout", "30", "osd", "new", osdUUID, "0", "-i", "-")
	if err == nil && strings.TrimSpace(id) != "0" {
		err = fmt.Errorf("cephtest: osd new returned %q, want 0", strings.TrimSpace(id))
	}
	if merr := <-mkfs; merr != nil {
		return merr
	}
	if err != nil {
		return err
	}
	return c.startDaemon("osd.0", "ceph-osd", "-i", "0")
}

// run runs one command; networked ones get the Wrap prefix. Output is returned;
// a failure includes it.
func (c *Cluster) run(ctx context.Context, networked bool, stdin []byte, argv ...string) (string, error) {
	if networked {
		argv = append(append([]string(nil), c.wrap...), argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "CEPH_CONF="+c.ConfigFile)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("cephtest: %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (c *Cluster) startDaemon(name, bin string, args ...string) error {
	argv := append([]string{bin, "--conf", c.ConfigFile, "-f"}, args...)
	stop, err := c.spawn(name, argv)
	if err != nil {
		return fmt.Errorf("cephtest: start %s: %w", name, err)
	}
	c.mu.Lock()
	c.daemons[name] = stop
	c.mu.Unlock()
	return nil
}

// spawnChild starts daemons as children of this process, killed with it.
func spawnChild(c *Cluster) func(string, []string) (func(), error) {
	return func(name string, argv []string) (func(), error) {
		argv = append(append([]string(nil), c.wrap...), argv...)
		logf, err := os.Create(c.path("log", name+".out"))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return nil, err
		}
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			logf.Close()
			close(done)
		}()
		return func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}, nil
	}
}

// StopDaemon stops one daemon ("mon.a", "mgr.x", "osd.0").
func (c *Cluster) StopDaemon(name string) {
	c.mu.Lock()
	stop := c.daemons[name]
	delete(c.daemons, name)
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Stop kills every daemon and removes the directory. It is safe to call twice.
func (c *Cluster) Stop() {
	c.mu.Lock()
	stops := c.daemons
	c.daemons = map[string]func(){}
	c.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	if c.ownDir && c.Dir != "" {
		_ = os.RemoveAll(c.Dir)
	}
}

// waitHealthy polls "ceph status" until HEALTH_OK with 1 OSD up and in and an
// available mgr, failing early when a daemon died.
func (c *Cluster) waitHealthy(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		out, err := c.run(ctx, true, nil, "ceph", "--conf", c.ConfigFile, "--connect-timeout", "5", "status", "-f", "json")
		if err == nil {
			up, in, avail, health := parseStatus(out)
			last = fmt.Sprintf("%d osd up, %d in, mgr available %v, %s", up, in, avail, health)
			if up == 1 && in == 1 && avail && health == "HEALTH_OK" {
				return nil
			}
		} else {
			last = err.Error()
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("cephtest: not healthy after %s: %s; logs in %s", limit, last, c.path("log"))
}

func parseStatus(out string) (up, in int, mgr bool, health string) {
	var s struct {
		Health struct {
			Status string `json:"status"`
		} `json:"health"`
		OSDMap map[string]json.RawMessage `json:"osdmap"`
		MgrMap struct {
			Available bool `json:"available"`
		} `json:"mgrmap"`
	}
	if json.Unmarshal([]byte(out), &s) != nil {
		return 0, 0, false, "unparsable status"
	}
	m := s.OSDMap
	if inner, ok := m["osdmap"]; ok {
		_ = json.Unmarshal(inner, &m)
	}
	_ = json.Unmarshal(m["num_up_osds"], &up)
	_ = json.Unmarshal(m["num_in_osds"], &in)
	return up, in, s.MgrMap.Available, s.Health.Status
}

// freePorts picks a base port with Port..Port+99 free on ip (TCP).
func freePorts(ip string) (int, error) {
	for range 100 {
		base := 20000 + 100*rand.IntN(400)
		ok := true
		for p := base; p < base+100 && ok; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("cephtest: no free range of 100 ports")
}

func uuid() string {
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
