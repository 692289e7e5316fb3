package containerd

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/distribution/reference"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/filememo"
)

// archiveInfo is what Diff needs to know about one archive file.
type archiveInfo struct {
	Digest string   `json:"digest"` // sha256:<hex> of the whole file
	Names  []string `json:"names"`  // image names containerd will give its images
}

// archiveCache remembers archiveInfo per file version, so drift checks do not hash
// gigabytes every minute: on disk in the driver's state (pkg/filememo), since each
// drift pass is a new process. The zero value remembers in memory only.
type archiveCache struct {
	mu        sync.Mutex
	memo      *filememo.Memo[archiveInfo]
	log       *slog.Logger
	inspected atomic.Int64 // archives read, for tests
}

func (c *archiveCache) m() *filememo.Memo[archiveInfo] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memo == nil {
		c.memo = filememo.New[archiveInfo]("")
	}
	return c.memo
}

// inspect returns path's digest and image names, from the cache when the file is
// unchanged.
func (c *archiveCache) inspect(path string) (archiveInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return archiveInfo{}, fmt.Errorf("containerd: archive %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return archiveInfo{}, fmt.Errorf("containerd: archive %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return archiveInfo{}, driver.Permanent(fmt.Errorf("containerd: archive %s is not a regular file", path))
	}
	info, _, saveErr, err := c.m().Do(path, f, func() (archiveInfo, error) {
		c.inspected.Add(1)
		var info archiveInfo
		var err error
		if info.Digest, err = fileDigest(f); err != nil {
			return info, fmt.Errorf("containerd: hash %s: %w", path, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return info, fmt.Errorf("containerd: archive %s: %w", path, err)
		}
		if info.Names, err = imageNames(f); err != nil {
			return info, fmt.Errorf("containerd: archive %s: %w", path, err)
		}
		if len(info.Names) == 0 {
			return info, driver.Permanent(fmt.Errorf("containerd: archive %s names no images; save it with tags (docker save NAME:TAG, ctr export)", path))
		}
		return info, nil
	})
	if err != nil {
		return archiveInfo{}, err
	}
	if saveErr != nil && c.log != nil {
		c.log.Warn("containerd: archive digests not remembered; the next check reads the archives again", "err", saveErr)
	}
	return info, nil
}

func fileDigest(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Annotations containerd reads image names from in an OCI index.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// maxJSON bounds the index files read from an archive, as containerd does.
const maxJSON = 20 << 20

// imageNames lists the names containerd's importer gives the images of a docker-save
// or OCI-layout tarball: an OCI layout wins when both are present. Layer contents are
// skipped (seeked over when r is a file). A truncated or unrecognized tar may still be
// arriving, so only errors in a complete index are Permanent.
func imageNames(r io.Reader) ([]string, error) {
	var (
		tr               = tar.NewReader(r)
		layout           bool
		index, manifests []byte
	)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tar: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		switch path.Clean(hdr.Name) {
		case "oci-layout":
			layout = true
		case "index.json":
			if index, err = io.ReadAll(io.LimitReader(tr, maxJSON)); err != nil {
				return nil, fmt.Errorf("read index.json: %w", err)
			}
		case "manifest.json":
			if manifests, err = io.ReadAll(io.LimitReader(tr, maxJSON)); err != nil {
				return nil, fmt.Errorf("read manifest.json: %w", err)
			}
		}
	}
	switch {
	case layout && index != nil:
		var idx struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.Unmarshal(index, &idx); err != nil {
			return nil, driver.Permanent(fmt.Errorf("decode index.json: %w", err))
		}
		var names []string
		for _, m := range idx.Manifests {
			if n := ociImageName(m.Annotations); n != "" {
				names = append(names, n)
			}
		}
		return dedupe(names), nil
	case manifests != nil:
		var mfsts []struct{ RepoTags []string }
		if err := json.Unmarshal(manifests, &mfsts); err != nil {
			return nil, driver.Permanent(fmt.Errorf("decode manifest.json: %w", err))
		}
		var names []string
		for _, m := range mfsts {
			for _, tag := range m.RepoTags {
				n, err := reference.ParseDockerRef(tag)
				if err != nil {
					return nil, driver.Permanent(fmt.Errorf("tag %q: %w", tag, err))
				}
				names = append(names, n.String())
			}
		}
		return dedupe(names), nil
	}
	return nil, errors.New("neither an OCI layout (oci-layout, index.json) nor a docker save archive (manifest.json)")
}

// ociImageName is the name containerd's Import gives one OCI index entry, with
// fullRefName as its reference translator.
func ociImageName(ann map[string]string) string {
	if n := ann[annotationImageName]; n != "" {
		return n
	}
	return fullRefName(ann[annotationRefName])
}

// fullRefName keeps an OCI ref.name only when it is a full image reference; a bare
// tag ("latest") names no image.
func fullRefName(ref string) string {
	if !strings.ContainsAny(ref, "/:@") {
		return ""
	}
	n, err := reference.ParseDockerRef(ref)
	if err != nil {
		return ""
	}
	return n.String()
}

func dedupe(names []string) []string {
	seen := map[string]bool{}
	out := names[:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
