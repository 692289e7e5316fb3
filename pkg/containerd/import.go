package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	containerd "github.com/containerd/containerd"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/images"
	"github.com/opencontainers/image-spec/identity"
	"google.golang.org/grpc"

	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/filememo"
)

// Labels set on every image an archive provided. An image is in sync when it carries
// the digest of an archive that names it and still points at the target it was
// imported with (a later pull under the same name keeps labels but moves the target).
const (
	labelArchive = "plinth.dev/image-archive"
	labelTarget  = "plinth.dev/image-target"
	// labelChain is the chain ID of the image's unpacked rootfs, so a check asks the
	// snapshotter for it at once instead of reading the index, manifest and config
	// from the content store to work it out (IsUnpacked). It is derived from the
	// target, which labelTarget pins; images labelled before it existed are checked
	// the long way.
	labelChain = "plinth.dev/image-chain"
)

// ImportDriver executes images.import steps.
type ImportDriver struct {
	address    string
	bundleRoot string
	log        *slog.Logger
	cache      archiveCache
}

var _ driver.Driver = (*ImportDriver)(nil)

// NewImportDriver returns a driver that imports through containerd's socket
// (Paths.Address) and remembers the archives' digests in stateDir ("" in memory).
func NewImportDriver(stateDir string, opts ...Option) *ImportDriver {
	o := newOptions(opts)
	d := &ImportDriver{address: o.paths.Address, bundleRoot: o.bundleRoot, log: o.log}
	d.cache.log = o.log
	if stateDir != "" {
		d.cache.memo = filememo.New[archiveInfo](filepath.Join(stateDir, archivesFile))
	}
	return d
}

// archivesFile is where the driver keeps the archives' digests, in its state dir.
const archivesFile = "images.import.archives.json"

// Kind implements driver.Driver.
func (d *ImportDriver) Kind() string { return containerdspec.KindImport }

// Diff implements driver.Driver: one change per archive whose images are missing,
// from another archive, or not unpacked for the snapshotter.
func (d *ImportDriver) Diff(ctx context.Context, inputs json.RawMessage) ([]driver.Change, error) {
	in, err := parseImport(inputs)
	if err == nil {
		in.Archives, err = d.withBundle(in)
	}
	if err != nil || len(in.Archives) == 0 {
		return nil, err
	}
	infos := make([]archiveInfo, len(in.Archives))
	providers := map[string][]string{} // image name -> digests of archives naming it
	for i, a := range in.Archives {
		if infos[i], err = d.cache.inspect(a.Path); err != nil {
			return nil, err
		}
		if a.Digest != "" && infos[i].Digest != a.Digest {
			return nil, fmt.Errorf("containerd: archive %s has digest %s, want %s (wrong file, or still being copied)", a.Path, infos[i].Digest, a.Digest)
		}
		for _, n := range infos[i].Names {
			providers[n] = append(providers[n], infos[i].Digest)
		}
	}
	c, err := d.dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	conn, err := dialCRI(d.address)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	inv, err := takeInventory(ctx, c, conn)
	if err != nil {
		return nil, err
	}
	var changes []driver.Change
	for i, a := range in.Archives {
		reasons, err := d.check(ctx, c, conn, inv, infos[i].Names, providers, in.Snapshotter)
		if err != nil {
			return nil, err
		}
		if len(reasons) > 0 {
			changes = append(changes, driver.Change{
				Summary: fmt.Sprintf("import %s: %s", a.Path, shortList(reasons, 3)),
				Apply:   d.importer(a.Path, infos[i].Digest, in.Snapshotter),
			})
		}
	}
	return changes, nil
}

// parseImport decodes and checks inputs; bad inputs are Permanent.
func parseImport(raw json.RawMessage) (containerdspec.ImportInputs, error) {
	var in containerdspec.ImportInputs
	if err := driver.DecodeInputs(containerdspec.KindImport, raw, &in); err != nil {
		return in, err
	}
	if in.Snapshotter == "" && len(in.Archives) > 0 {
		return in, driver.Permanent(errors.New("containerd: inputs: snapshotter is required"))
	}
	for i, a := range in.Archives {
		if !filepath.IsAbs(a.Path) {
			return in, driver.Permanent(fmt.Errorf("containerd: inputs: archive path %q is not absolute", a.Path))
		}
		if slices.IndexFunc(in.Archives[:i], func(o containerdspec.Archive) bool { return o.Path == a.Path }) >= 0 {
			return in, driver.Permanent(fmt.Errorf("containerd: inputs: archive %s is listed twice", a.Path))
		}
	}
	return in, nil
}

// withBundle adds the archives of the inputs' site bundle, as it was unpacked on this
// host, each pinned by its manifest sum.
func (d *ImportDriver) withBundle(in containerdspec.ImportInputs) ([]containerdspec.Archive, error) {
	if in.Bundle == "" {
		return in.Archives, nil
	}
	if err := bundle.CheckVersion(in.Bundle); err != nil {
		return nil, driver.Permanent(fmt.Errorf("containerd: inputs: %w", err))
	}
	dir := bundle.VersionDir(d.bundleRoot, in.Bundle)
	if _, err := os.Stat(filepath.Join(dir, bundle.ManifestFile)); err != nil {
		return nil, driver.Permanent(fmt.Errorf("containerd: bundle %s is not on this host (%w): run the install script with that bundle", in.Bundle, err))
	}
	m, err := bundle.ReadPinned(dir, in.BundleSHA256)
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("containerd: %w", err))
	}
	out := slices.Clone(in.Archives)
	for _, c := range m.OfKind(bundle.KindImage) {
		if slices.Contains(in.SkipBundleImages, c.Name) {
			continue
		}
		p := filepath.Join(dir, c.Path)
		if slices.IndexFunc(out, func(a containerdspec.Archive) bool { return a.Path == p }) < 0 {
			out = append(out, containerdspec.Archive{Path: p, Digest: "sha256:" + c.SHA256})
		}
	}
	if len(out) > 0 && in.Snapshotter == "" {
		return nil, driver.Permanent(errors.New("containerd: inputs: snapshotter is required"))
	}
	return out, nil
}

func (d *ImportDriver) dial() (*containerd.Client, error) {
	// A missing socket fails at once instead of after the client's dial timeout.
	if _, err := os.Stat(d.address); err != nil {
		return nil, fmt.Errorf("containerd: connect %s (is containerd running?): %w", d.address, err)
	}
	c, err := containerd.New(d.address, containerd.WithDefaultNamespace(containerdspec.Namespace), containerd.WithTimeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("containerd: connect %s: %w", d.address, err)
	}
	return c, nil
}

// inventory is what a check reads once for all archives: containerd's images and the
// names the CRI lists, instead of one Get and one ImageStatus per image.
type inventory struct {
	images map[string]images.Image
	cri    map[string]bool // repo tags and repo digests
}

func takeInventory(ctx context.Context, c *containerd.Client, conn *grpc.ClientConn) (inventory, error) {
	imgs, err := c.ImageService().List(ctx)
	if err != nil {
		return inventory{}, fmt.Errorf("containerd: list images: %w", err)
	}
	inv := inventory{images: make(map[string]images.Image, len(imgs))}
	for _, img := range imgs {
		inv.images[img.Name] = img
	}
	if inv.cri, err = criImageNames(ctx, conn); err != nil {
		return inventory{}, err
	}
	return inv, nil
}

// check returns why the images of one archive are not in sync; none means they are.
func (d *ImportDriver) check(ctx context.Context, c *containerd.Client, conn *grpc.ClientConn, inv inventory, names []string, providers map[string][]string, snapshotter string) ([]string, error) {
	var reasons []string
	for _, n := range names {
		img, ok := inv.images[n]
		if !ok {
			reasons = append(reasons, n+" missing")
			continue
		}
		if !slices.Contains(providers[n], img.Labels[labelArchive]) || img.Labels[labelTarget] != img.Target.Digest.String() {
			reasons = append(reasons, n+" not from this archive")
			continue
		}
		ok, err := unpacked(ctx, c, img, snapshotter)
		switch {
		case err != nil:
			reasons = append(reasons, fmt.Sprintf("%s incomplete (%v)", n, err))
		case !ok:
			reasons = append(reasons, n+" not unpacked for "+snapshotter)
		case inv.cri[n]:
		default:
			// Not listed under this exact name: ask for it, as the kubelet would.
			seen, err := criHasImage(ctx, conn, n)
			if err != nil {
				return nil, err
			}
			if !seen {
				reasons = append(reasons, n+" not seen by the CRI")
			}
		}
	}
	return reasons, nil
}

// unpacked reports whether img's rootfs is unpacked for the snapshotter: by the chain
// ID finish recorded, or, for an image without one, the way containerd works it out.
func unpacked(ctx context.Context, c *containerd.Client, img images.Image, snapshotter string) (bool, error) {
	chain := img.Labels[labelChain]
	if chain == "" {
		return containerd.NewImage(c, img).IsUnpacked(ctx, snapshotter)
	}
	_, err := c.SnapshotService(snapshotter).Stat(ctx, chain)
	switch {
	case errdefs.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("snapshot %s: %w", chain, err)
	}
	return true, nil
}

// importer returns the Apply that imports one archive, unpacks its images and labels
// them with digest, the archive's digest as Diff saw it.
func (d *ImportDriver) importer(path, digest, snapshotter string) func(context.Context) error {
	return func(ctx context.Context) error {
		start := time.Now()
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("containerd: archive %s: %w", path, err)
		}
		defer f.Close()
		c, err := d.dial()
		if err != nil {
			return err
		}
		defer c.Close()
		// Hash what is imported: a file replaced since Diff must not get its labels.
		h := sha256.New()
		r := io.TeeReader(f, h)
		imgs, err := c.Import(ctx, r, containerd.WithImageRefTranslator(fullRefName))
		if err != nil {
			return fmt.Errorf("containerd: import %s: %w", path, err)
		}
		if _, err := io.Copy(io.Discard, r); err != nil { // the tar's trailing padding
			return fmt.Errorf("containerd: read %s: %w", path, err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
			return fmt.Errorf("containerd: archive %s changed while importing (%s, expected %s)", path, got, digest)
		}
		names := make([]string, 0, len(imgs))
		for _, img := range imgs {
			if err := d.finish(ctx, c, img, digest, snapshotter); err != nil {
				return err
			}
			names = append(names, img.Name)
		}
		if err := d.waitCRI(ctx, names); err != nil {
			return err
		}
		d.log.Info("containerd: imported archive", "archive", path, "images", names, "took", time.Since(start).Round(time.Millisecond))
		return nil
	}
}

// finish unpacks one imported image and labels it as coming from the archive.
func (d *ImportDriver) finish(ctx context.Context, c *containerd.Client, img images.Image, digest, snapshotter string) error {
	i := containerd.NewImage(c, img)
	if ok, err := i.IsUnpacked(ctx, snapshotter); err != nil || !ok {
		if err := i.Unpack(ctx, snapshotter); err != nil {
			return fmt.Errorf("containerd: unpack %s for %s: %w", img.Name, snapshotter, err)
		}
	}
	diffs, err := i.RootFS(ctx)
	if err != nil {
		return fmt.Errorf("containerd: rootfs of %s: %w", img.Name, err)
	}
	if img.Labels == nil {
		img.Labels = map[string]string{}
	}
	img.Labels[labelArchive] = digest
	img.Labels[labelTarget] = img.Target.Digest.String()
	img.Labels[labelChain] = identity.ChainID(diffs).String()
	if _, err := c.ImageService().Update(ctx, img, "labels."+labelArchive, "labels."+labelTarget, "labels."+labelChain); err != nil {
		return fmt.Errorf("containerd: label %s: %w", img.Name, err)
	}
	return nil
}

// waitCRI waits until the CRI sees every name, so the kubelet never looks too early.
func (d *ImportDriver) waitCRI(ctx context.Context, names []string) error {
	conn, err := dialCRI(d.address)
	if err != nil {
		return err
	}
	defer conn.Close()
	return waitReady(ctx, func(ctx context.Context) error {
		for _, n := range names {
			seen, err := criHasImage(ctx, conn, n)
			if err != nil {
				return err
			}
			if !seen {
				return fmt.Errorf("containerd: CRI does not see imported image %s", n)
			}
		}
		return nil
	}, 10*time.Second)
}

// shortList joins the first n items and counts the rest, to keep summaries one line.
func shortList(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
