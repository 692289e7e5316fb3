package containerd

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/image-spec/identity"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/containerd/containerdspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// TestDaemonImportWithRoot imports a docker-save and an OCI archive into a real
// containerd: the CRI lists the images with the right IDs, a second run is a no-op, a
// removed image is imported again, and a file that does not match its pinned digest
// fails the step (retryably) without importing.
func TestDaemonImportWithRoot(t *testing.T) {
	d := newTestDaemon(t)
	ctx := contextFor(t)
	cfg := containerdspec.ConfigInputs{SandboxImage: "registry.local/plinth/pause:3.10.2", CgroupDriver: "cgroupfs", Snapshotter: "overlayfs"}
	if res := driver.Run(ctx, NewConfigDriver(filepath.Join(d.dir, "agent"), d.options()...), mustJSON(t, cfg)); !res.OK() {
		t.Fatalf("config: %s", res.Error)
	}

	dir := t.TempDir()
	pause, app, oci := testImage(t, 21), testImage(t, 22), testImage(t, 23)
	dockerTar, ociTar := filepath.Join(dir, "k8s.tar"), filepath.Join(dir, "oci.tar")
	dockerArchive(t, dockerTar, map[string]v1.Image{"registry.local/plinth/pause:3.10.2": pause, "registry.local/plinth/app:1": app})
	ociArchive(t, ociTar, oci, map[string]string{annotationImageName: "registry.local/plinth/oci:1"})
	f, err := os.Open(dockerTar)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := fileDigest(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	// Archives written a moment ago are hashed every time; old enough, their
	// digests are remembered for the next process (pkg/filememo).
	time.Sleep(2100 * time.Millisecond)
	state := t.TempDir()
	id := NewImportDriver(state, d.options()...)
	in := containerdspec.ImportInputs{Snapshotter: "overlayfs", Archives: []containerdspec.Archive{{Path: dockerTar, Digest: sum}, {Path: ociTar}}}
	res := driver.Run(ctx, id, mustJSON(t, in))
	if !res.OK() || len(res.Changes) != 2 {
		t.Fatalf("first import: changes %q, error %q", res.Changes, res.Error)
	}

	_, is := d.cri()
	want := map[string]v1.Image{
		"registry.local/plinth/pause:3.10.2": pause, "registry.local/plinth/app:1": app, "registry.local/plinth/oci:1": oci,
	}
	checkListed := func() {
		t.Helper()
		tags, err := imageTags(ctx, is)
		if err != nil {
			t.Fatal(err)
		}
		for tag, img := range want {
			cfgName, err := img.ConfigName()
			if err != nil {
				t.Fatal(err)
			}
			if tags[tag] != cfgName.String() {
				t.Errorf("CRI lists %s as %q, want image %s (all: %v)", tag, tags[tag], cfgName, tags)
			}
		}
	}
	checkListed()

	if res := driver.Run(ctx, id, mustJSON(t, in)); !res.OK() || len(res.Changes) != 0 {
		t.Fatalf("re-import: changes %q, error %q; want none", res.Changes, res.Error)
	}

	// Each image records its unpacked rootfs's chain ID, the one containerd works out.
	c, err := containerd.New(d.paths.Address, containerd.WithDefaultNamespace(containerdspec.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	app1, err := c.ImageService().Get(ctx, "registry.local/plinth/app:1")
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := containerd.NewImage(c, app1).RootFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := app1.Labels[labelChain], identity.ChainID(diffs).String(); got != want {
		t.Fatalf("chain label %q, want %q", got, want)
	}
	// An image labelled before the chain ID was recorded is checked the long way.
	delete(app1.Labels, labelChain)
	if _, err := c.ImageService().Update(ctx, app1, "labels."+labelChain); err != nil {
		t.Fatal(err)
	}
	if drift, err := driver.Check(ctx, NewImportDriver(state, d.options()...), mustJSON(t, in)); err != nil || len(drift) != 0 {
		t.Fatalf("an image without a chain label: drift %q, %v; want none", drift, err)
	}
	// A snapshot removed behind Plinth's back: the image is unpacked again.
	oci1, err := c.ImageService().Get(ctx, "registry.local/plinth/oci:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SnapshotService("overlayfs").Remove(ctx, oci1.Labels[labelChain]); err != nil {
		t.Fatal(err)
	}
	drift, err := driver.Check(ctx, NewImportDriver(state, d.options()...), mustJSON(t, in))
	if err != nil || len(drift) != 1 || !strings.Contains(drift[0], "registry.local/plinth/oci:1 not unpacked for overlayfs") {
		t.Fatalf("drift = %q, %v; want the OCI image not unpacked", drift, err)
	}
	if res := driver.Run(ctx, id, mustJSON(t, in)); !res.OK() || len(res.Changes) != 1 {
		t.Fatalf("unpack again: changes %q, error %q", res.Changes, res.Error)
	}

	// Drift: an image removed behind Plinth's back comes back from its archive.
	if _, err := is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "registry.local/plinth/app:1"}}); err != nil {
		t.Fatal(err)
	}
	// The drift check runs in a new process, as every drift pass does: it finds
	// the archives' digests and names in the driver's state, without reading them.
	fresh := NewImportDriver(state, d.options()...)
	drift, err = driver.Check(ctx, fresh, mustJSON(t, in))
	if err != nil || len(drift) != 1 || !strings.Contains(drift[0], "registry.local/plinth/app:1 missing") {
		t.Fatalf("drift = %q, %v; want the missing app image", drift, err)
	}
	if n := fresh.cache.inspected.Load(); n != 0 {
		t.Fatalf("a drift check of unchanged archives read %d of them", n)
	}
	if res := driver.Run(ctx, id, mustJSON(t, in)); !res.OK() || len(res.Changes) != 1 {
		t.Fatalf("repair: changes %q, error %q", res.Changes, res.Error)
	}
	checkListed()

	// A pinned digest that does not match: fail before importing anything.
	in.Archives[0].Digest = "sha256:" + strings.Repeat("0", 64)
	res = driver.Run(ctx, id, mustJSON(t, in))
	if res.OK() || !res.Retryable || !strings.Contains(res.Error, "has digest "+sum) {
		t.Fatalf("wrong digest: %+v; want a retryable digest error", res)
	}
}

// TestDaemonImportFromBundle imports the images of a site bundle unpacked on the
// host: the step names only the bundle version (and its pin), the driver finds the
// archives and their sums in the bundle's manifest, and a damaged archive is refused.
func TestDaemonImportFromBundle(t *testing.T) {
	d := newTestDaemon(t)
	ctx := contextFor(t)
	cfg := containerdspec.ConfigInputs{SandboxImage: "registry.local/pause:3.10.2", CgroupDriver: "cgroupfs", Snapshotter: "overlayfs"}
	if res := driver.Run(ctx, NewConfigDriver(filepath.Join(d.dir, "agent"), d.options()...), mustJSON(t, cfg)); !res.OK() {
		t.Fatalf("config: %s", res.Error)
	}
	root := t.TempDir()
	dir := bundle.VersionDir(root, "1.0")
	tar := filepath.Join(dir, bundle.ImageDir, "pause.tar")
	if err := os.MkdirAll(filepath.Dir(tar), 0o755); err != nil {
		t.Fatal(err)
	}
	dockerArchive(t, tar, map[string]v1.Image{"registry.local/pause:3.10.2": testImage(t, 31)})
	raw, err := os.ReadFile(tar)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	m := bundle.Manifest{Version: "1.0", PlinthVersion: "test", KubernetesVersion: "v1.37.2", Components: []bundle.Component{{
		Name: "pause", Kind: bundle.KindImage, Version: "3.10.2", Path: "images/pause.tar", SHA256: hex.EncodeToString(sum[:]),
		Size: int64(len(raw)), Image: "registry.local/pause:3.10.2",
	}}}
	if err := os.WriteFile(filepath.Join(dir, bundle.ManifestFile), mustJSON(t, m), 0o644); err != nil {
		t.Fatal(err)
	}
	id := NewImportDriver(t.TempDir(), append(d.options(), WithBundleRoot(root))...)
	in := containerdspec.ImportInputs{Snapshotter: "overlayfs", Bundle: "1.0"}
	if res := driver.Run(ctx, id, mustJSON(t, in)); !res.OK() || len(res.Changes) != 1 {
		t.Fatalf("import from bundle: changes %q, error %q", res.Changes, res.Error)
	}
	if res := driver.Run(ctx, id, mustJSON(t, in)); !res.OK() || len(res.Changes) != 0 {
		t.Fatalf("re-import: changes %q, error %q; want none", res.Changes, res.Error)
	}
	// The site pins another manifest: refused, permanently.
	in.BundleSHA256 = strings.Repeat("0", 64)
	if res := driver.Run(ctx, id, mustJSON(t, in)); res.OK() || res.Retryable || !strings.Contains(res.Error, "the site pins") {
		t.Fatalf("pinned to another manifest: %+v", res)
	}
	// A damaged archive does not match its manifest sum.
	in.BundleSHA256 = ""
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(tar, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := driver.Run(ctx, id, mustJSON(t, in)); res.OK() || !strings.Contains(res.Error, "want sha256:"+m.Components[0].SHA256) {
		t.Fatalf("damaged archive: %+v", res)
	}
	// A host that skips the component never reads its archive.
	in.SkipBundleImages = []string{"pause"}
	if res := driver.Run(ctx, id, mustJSON(t, in)); !res.OK() || len(res.Changes) != 0 {
		t.Fatalf("skipped component: %+v", res)
	}
}
