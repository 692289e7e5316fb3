// Command imgbuild writes the bundle's container images: one single-layer image per
// call, holding the given files (by default at /usr/local/bin/<name>) on a minimal
// root (passwd, group, nsswitch.conf, the usual empty directories), saved as a
// docker-archive tarball tagged with the given reference. Every timestamp is zero,
// so the same files give the same archive.
//
//	imgbuild -o kube-proxy.tar -ref registry.local/kube-proxy:v1.37.2 kube-proxy /usr/sbin/nft=/usr/sbin/nft ...
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	out := flag.String("o", "", "output tarball (required)")
	ref := flag.String("ref", "", "image reference, e.g. registry.local/pause:3.10.2 (required)")
	entrypoint := flag.String("entrypoint", "", "entrypoint, comma-separated (default: none; the pod spec names the command)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: imgbuild -o OUT.tar -ref REF [-entrypoint CMD] FILE[=/DEST]...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || *ref == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := build(*out, *ref, *entrypoint, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "imgbuild:", err)
		os.Exit(1)
	}
}

var epoch = time.Unix(0, 0).UTC()

// base is the minimal root every image has: directories (with their modes) and files.
var (
	baseDirs  = []string{"dev", "etc", "proc", "run", "sys", "tmp", "usr", "usr/local", "usr/local/bin", "var", "var/run"}
	baseFiles = map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n",
		"etc/group":         "root:x:0:\nnobody:x:65534:\n",
		"etc/nsswitch.conf": "hosts: files dns\n",
	}
)

func build(out, ref, entrypoint string, files []string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("-ref %q: %w", ref, err)
	}
	layer, err := rootLayer(files)
	if err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = "amd64", "linux", v1.Time{Time: epoch}
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if entrypoint != "" {
		cf.Config.Entrypoint = strings.Split(entrypoint, ",")
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}

// rootLayer is the uncompressed layer: the base root plus each FILE at
// /usr/local/bin/<base name>, or SRC=/DEST at DEST (its parents made as needed).
func rootLayer(files []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	made := map[string]bool{}
	dir := func(d string) error {
		if made[d] {
			return nil
		}
		made[d] = true
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: epoch})
	}
	for _, d := range baseDirs {
		if err := dir(d); err != nil {
			return nil, err
		}
	}
	for _, n := range []string{"etc/group", "etc/nsswitch.conf", "etc/passwd"} {
		c := baseFiles[n]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(c)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, c); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		src, dst := f, "usr/local/bin/"+filepath.Base(f)
		if s, d, ok := strings.Cut(f, "="); ok {
			if !path.IsAbs(d) || path.Clean(d) != d {
				return nil, fmt.Errorf("%s: destination %q must be a clean absolute path", f, d)
			}
			src, dst = s, strings.TrimPrefix(d, "/")
		}
		parts := strings.Split(dst, "/")
		for i := 1; i < len(parts); i++ {
			if err := dir(strings.Join(parts[:i], "/")); err != nil {
				return nil, err
			}
		}
		if err := addFile(tw, src, dst); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addFile(tw *tar.Writer, src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: dst, Mode: 0o755, Size: st.Size(), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}
