package kubeinstall

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/filememo"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// Where kube.binaries installs. The binaries are the site's, not a Debian package's,
// so they go under /usr/local (api.DefaultEtcdBinary points there too).
const (
	binDir         = "/usr/local/bin"
	cniBinDir      = "/opt/cni/bin"
	kubeletUnit    = "kubelet.service"
	kubeletUnitDir = "/etc/systemd/system"
)

var (
	//go:embed units/kubelet.service
	kubeletUnitFile []byte
	//go:embed units/10-kubeadm.conf
	kubeletDropIn []byte
)

// BinariesDriver runs kube.binaries: it installs the Kubernetes binaries, etcd and
// the CNI plugins a host needs from the site bundle the install script unpacked
// (pkg/bundle), checking every file against the bundle's manifest, and kubelet's
// systemd unit. A bundle version change in the manifest changes the inputs, so the
// step runs again and the new binaries replace the old ones atomically.
type BinariesDriver struct {
	o    *options
	root string
	// sums holds each installed file's SHA-256 per file version, on disk: a drift
	// pass is a new process every minute (pkg/filememo).
	sums   *filememo.Memo[string]
	hashed atomic.Int64 // files read to hash them, for tests
}

// sumsFile is where the driver keeps the installed files' sums, in its state dir.
const sumsFile = "kube.binaries.sums.json"

// NewBinariesDriver returns the kube.binaries driver; bundles are read from
// bundleRoot (bundle.DefaultRoot on hosts), under the driver's root in tests.
func NewBinariesDriver(stateDir, bundleRoot string, opts ...Option) *BinariesDriver {
	memo := ""
	if stateDir != "" {
		memo = filepath.Join(stateDir, sumsFile)
	}
	return &BinariesDriver{o: newOptions(stateDir, opts), root: bundleRoot, sums: filememo.New[string](memo)}
}

// Kind implements driver.Driver.
func (d *BinariesDriver) Kind() string { return kubespec.KindBinaries }

// Diff implements driver.Driver.
func (d *BinariesDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in kubespec.BinariesInputs
	if err := driver.DecodeInputs(d.Kind(), raw, &in); err != nil {
		return nil, err
	}
	if err := bundle.CheckVersion(in.Bundle); err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.binaries: %w", err))
	}
	p := d.o.paths
	dir := p.Join(bundle.VersionDir(d.root, in.Bundle))
	m, err := d.manifest(dir, in)
	if err != nil {
		return nil, err
	}
	var cs []driver.Change
	install := func(c bundle.Component, dest string) error {
		sum, err := d.sum(dest)
		if err != nil {
			return err
		}
		if sum == c.SHA256 {
			return nil
		}
		what := "install"
		if sum != "" {
			what = "replace"
		}
		src := path.Join(dir, c.Path)
		cs = append(cs, driver.Change{
			Summary: fmt.Sprintf("%s %s %s from bundle %s (sha256 %.12s) at %s", what, c.Name, c.Version, in.Bundle, c.SHA256, dest),
			Apply:   func(context.Context) error { return d.copyChecked(src, dest, c) },
		})
		return nil
	}
	for _, name := range in.Binaries {
		c, err := m.Find(bundle.KindBinary, name)
		if err != nil {
			return nil, driver.Permanent(fmt.Errorf("kube.binaries: %w", err))
		}
		if err := install(c, p.Join(path.Join(binDir, name))); err != nil {
			return nil, err
		}
	}
	if in.CNIPlugins {
		plugins := m.OfKind(bundle.KindCNI)
		if len(plugins) == 0 {
			return nil, driver.Permanent(fmt.Errorf("kube.binaries: bundle %s holds no CNI plugins", in.Bundle))
		}
		for _, c := range plugins {
			if err := install(c, p.Join(path.Join(cniBinDir, c.Name))); err != nil {
				return nil, err
			}
		}
	}
	if in.Kubelet {
		cs = append(cs, d.kubeletChanges(ctx)...)
	}
	return cs, nil
}

// manifest reads the bundle's manifest, checking it against the site's pin.
func (d *BinariesDriver) manifest(dir string, in kubespec.BinariesInputs) (bundle.Manifest, error) {
	if _, err := os.Stat(path.Join(dir, bundle.ManifestFile)); err != nil {
		return bundle.Manifest{}, driver.Permanent(fmt.Errorf("kube.binaries: bundle %s is not on this host (%w): run the install script with that bundle", in.Bundle, err))
	}
	m, err := bundle.ReadPinned(dir, in.SHA256)
	if err != nil {
		return bundle.Manifest{}, driver.Permanent(fmt.Errorf("kube.binaries: %w", err))
	}
	if m.Version != in.Bundle {
		return bundle.Manifest{}, driver.Permanent(fmt.Errorf("kube.binaries: %s says version %q, want %q", dir, m.Version, in.Bundle))
	}
	return m, nil
}

// sum is the SHA-256 of an installed file ("" when absent), remembered per version
// of the file so drift checks do not re-read 100 MB binaries.
func (d *BinariesDriver) sum(file string) (string, error) {
	f, err := os.Open(file)
	if missing(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("kube.binaries: %w", err)
	}
	defer f.Close()
	sum, _, saveErr, err := d.sums.Do(file, f, func() (string, error) {
		d.hashed.Add(1)
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	})
	if err != nil {
		return "", fmt.Errorf("kube.binaries: read %s: %w", file, err)
	}
	if saveErr != nil {
		d.o.log.Warn("kube.binaries: sums not remembered; the next check reads the files again", "err", saveErr)
	}
	return sum, nil
}

// copyChecked replaces dest with src, refusing (and keeping the old dest) when what
// was read does not match the bundle's manifest.
func (d *BinariesDriver) copyChecked(src, dest string, c bundle.Component) error {
	f, err := os.Open(src)
	if err != nil {
		return driver.Permanent(fmt.Errorf("bundle file %s: %w (re-run the install script with the bundle)", src, err))
	}
	defer f.Close()
	if err := os.MkdirAll(path.Dir(dest), 0o755); err != nil {
		return err
	}
	h := sha256.New()
	if err := atomicfile.WriteFrom(dest, &checked{r: io.TeeReader(f, h), h: h, want: c.SHA256, src: src}, 0o755); err != nil {
		return err
	}
	return nil
}

// checked fails the read at EOF when the content's sum is not the expected one, so a
// damaged bundle file never replaces an installed binary.
type checked struct {
	r    io.Reader
	h    hash.Hash
	want string
	src  string
}

func (c *checked) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		if got := hex.EncodeToString(c.h.Sum(nil)); got != c.want {
			return n, driver.Permanent(fmt.Errorf("bundle file %s has sha256 %s, its manifest says %s: the bundle is damaged; re-copy it and re-run the install script", c.src, got, c.want))
		}
	}
	return n, err
}

// kubeletChanges installs kubelet's unit and kubeadm's drop-in and enables the unit;
// kubeadm starts it.
func (d *BinariesDriver) kubeletChanges(ctx context.Context) []driver.Change {
	p := d.o.paths
	unit := p.Join(path.Join(kubeletUnitDir, kubeletUnit))
	dropIn := p.Join(path.Join(kubeletUnitDir, kubeletUnit+".d", "10-kubeadm.conf"))
	var cs []driver.Change
	wrote := false
	for _, f := range []struct {
		path string
		data []byte
	}{{unit, kubeletUnitFile}, {dropIn, kubeletDropIn}} {
		if sameFile(f.path, f.data) {
			continue
		}
		wrote = true
		cs = append(cs, driver.Change{Summary: "write " + f.path,
			Apply: func(context.Context) error { return writeFile(f.path, f.data, 0o644) }})
	}
	if wrote || !d.kubeletEnabled() {
		cs = append(cs, driver.Change{Summary: "enable " + kubeletUnit,
			Apply: func(ctx context.Context) error {
				for _, args := range [][]string{{"daemon-reload"}, {"enable", kubeletUnit}} {
					if _, err := d.o.run.Run(ctx, nil, "systemctl", args...); err != nil {
						return err
					}
				}
				return nil
			}})
	}
	return cs
}

// kubeletEnabled reports whether kubelet's unit is enabled: whether the links
// `systemctl enable` makes in the .wants directories of the unit's WantedBy targets
// point at it. Reading them spares every drift pass a systemctl process (about
// 15 ms of CPU on a host); a mask would replace the unit file, which sameFile sees.
func (d *BinariesDriver) kubeletEnabled() bool {
	targets := wantedBy(kubeletUnitFile)
	for _, t := range targets {
		dest, err := os.Readlink(d.o.paths.Join(path.Join(kubeletUnitDir, t+".wants", kubeletUnit)))
		if err != nil || path.Base(dest) != kubeletUnit {
			return false
		}
	}
	return len(targets) > 0
}

// wantedBy lists the WantedBy= targets of a unit file's [Install] section.
func wantedBy(unit []byte) []string {
	var targets []string
	install := false
	for line := range strings.Lines(string(unit)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			install = line == "[Install]"
			continue
		}
		if v, ok := strings.CutPrefix(line, "WantedBy="); ok && install {
			targets = append(targets, strings.Fields(v)...)
		}
	}
	return targets
}
