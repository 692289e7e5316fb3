package containerd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/plinth-dev/plinth/pkg/driver"
)

func TestImageNamesDockerArchive(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.tar")
	img := testImage(t, 1)
	dockerArchive(t, p, map[string]v1.Image{"registry.local/plinth/a:1": img, "busybox:1": img})
	var c archiveCache
	info, err := c.inspect(p)
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(slices.Values(info.Names)) // a copy: the value is the memo's
	// Short names are normalized the way containerd's importer does.
	want := []string{"docker.io/library/busybox:1", "registry.local/plinth/a:1"}
	if !slices.Equal(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
	f, _ := os.Open(p)
	defer f.Close()
	if d, _ := fileDigest(f); d != info.Digest {
		t.Fatalf("digest = %s, want %s", info.Digest, d)
	}
}

func TestImageNamesOCIArchive(t *testing.T) {
	dir := t.TempDir()
	img := testImage(t, 2)
	tests := []struct {
		name string
		ann  map[string]string
		want []string
	}{
		{"containerd annotation", map[string]string{annotationImageName: "registry.local/b:2", annotationRefName: "2"}, []string{"registry.local/b:2"}},
		{"full ref name", map[string]string{annotationRefName: "registry.local/c:3"}, []string{"registry.local/c:3"}},
		{"bare tag names nothing", map[string]string{annotationRefName: "latest"}, nil},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name+".tar")
			ociArchive(t, p, img, tt.ann)
			var c archiveCache
			info, err := c.inspect(p)
			if tt.want == nil {
				if err == nil || !driver.IsPermanent(err) {
					t.Fatalf("archive without names: err = %v, want a permanent error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(info.Names, tt.want) {
				t.Fatalf("case %d: names = %v, want %v", i, info.Names, tt.want)
			}
		})
	}
}

func TestArchiveCacheSeesNewContent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.tar")
	dockerArchive(t, p, map[string]v1.Image{"registry.local/a:1": testImage(t, 1)})
	var c archiveCache
	first, err := c.inspect(p)
	if err != nil {
		t.Fatal(err)
	}
	dockerArchive(t, p, map[string]v1.Image{"registry.local/a:1": testImage(t, 2)})
	second, err := c.inspect(p)
	if err != nil {
		t.Fatal(err)
	}
	if first.Digest == second.Digest {
		t.Fatal("rewritten archive kept its cached digest")
	}
}

func TestArchiveErrors(t *testing.T) {
	dir := t.TempDir()
	var c archiveCache
	if _, err := c.inspect(filepath.Join(dir, "missing.tar")); err == nil || driver.IsPermanent(err) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing archive: err = %v, want a retryable not-exist error", err)
	}
	junk := filepath.Join(dir, "junk.tar")
	os.WriteFile(junk, bytes.Repeat([]byte("not a tar "), 200), 0o644)
	if _, err := c.inspect(junk); err == nil || driver.IsPermanent(err) {
		t.Errorf("junk archive: err = %v, want retryable (it may still be arriving)", err)
	}
	// A truncated archive may still be arriving: retry.
	good := filepath.Join(dir, "good.tar")
	dockerArchive(t, good, map[string]v1.Image{"registry.local/a:1": testImage(t, 1)})
	b, _ := os.ReadFile(good)
	short := filepath.Join(dir, "short.tar")
	os.WriteFile(short, b[:len(b)/2], 0o644)
	if _, err := c.inspect(short); err == nil || driver.IsPermanent(err) {
		t.Errorf("truncated archive: err = %v, want retryable", err)
	}
	if _, err := c.inspect(dir); !driver.IsPermanent(err) {
		t.Errorf("directory: err = %v, want permanent", err)
	}
}
