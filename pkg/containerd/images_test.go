package containerd

import (
	"archive/tar"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testImage is a tiny random image for this machine's platform (containerd only
// unpacks images whose config names a platform it can run).
func testImage(t *testing.T, seed int64) v1.Image {
	t.Helper()
	img, err := random.Image(512, 1, random.WithSource(rand.NewSource(seed)))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// dockerArchive writes a docker-save tarball of the images under their tags.
func dockerArchive(t *testing.T, path string, byTag map[string]v1.Image) {
	t.Helper()
	m := map[name.Tag]v1.Image{}
	for tag, img := range byTag {
		ref, err := name.NewTag(tag)
		if err != nil {
			t.Fatal(err)
		}
		m[ref] = img
	}
	if err := tarball.MultiWriteToFile(path, m); err != nil {
		t.Fatal(err)
	}
}

// ociArchive writes an OCI-layout tarball holding img with the given index annotations.
func ociArchive(t *testing.T, path string, img v1.Image, annotations map[string]string) {
	t.Helper()
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(annotations)); err != nil {
		t.Fatal(err)
	}
	if err := tarDir(dir, path); err != nil {
		t.Fatal(err)
	}
}

func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		if hdr.Name, err = filepath.Rel(dir, p); err != nil {
			return err
		}
		if err := tw.WriteHeader(hdr); err != nil || e.IsDir() {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
