package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Remedy is what to do about a bundle that fails verification.
const Remedy = "re-copy the bundle from the build host (or rebuild it there with `make bundle`)"

// Problem is one thing wrong with a bundle, at a bundle-relative path.
type Problem struct {
	Path   string
	Detail string
}

// VerifyError lists everything wrong with a bundle, so one run shows the whole damage.
type VerifyError struct {
	Bundle   string
	Problems []Problem
}

func (e *VerifyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bundle %s failed verification (%d problem(s)):", e.Bundle, len(e.Problems))
	for i, p := range e.Problems {
		if i == 20 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e.Problems)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s: %s", p.Path, p.Detail)
	}
	b.WriteString("\n" + Remedy)
	return b.String()
}

// fileSum is what a bundle file holds, as read from the disk or the archive.
type fileSum struct {
	sha256 string
	size   int64
}

// contents is a bundle as read for verification: every regular file's sum and size,
// the two files verification reads, and anything that was not a regular file.
type contents struct {
	files    map[string]fileSum
	manifest []byte
	sums     []byte
	problems []Problem
}

func newContents() *contents { return &contents{files: map[string]fileSum{}} }

// add hashes one regular file, keeping manifest.json and SHA256SUMS' bytes.
func (c *contents) add(rel string, r io.Reader) error {
	if _, dup := c.files[rel]; dup {
		c.problems = append(c.problems, Problem{rel, "appears twice in the bundle"})
	}
	h := sha256.New()
	var keep *bytes.Buffer
	if rel == ManifestFile || rel == SumsFile {
		keep = &bytes.Buffer{}
		r = io.TeeReader(io.LimitReader(r, 64<<20), keep)
	}
	n, err := io.Copy(h, r)
	if err != nil {
		return fmt.Errorf("bundle: read %s: %w", rel, err)
	}
	c.files[rel] = fileSum{hex.EncodeToString(h.Sum(nil)), n}
	switch rel {
	case ManifestFile:
		c.manifest = keep.Bytes()
	case SumsFile:
		c.sums = keep.Bytes()
	}
	return nil
}

// Verify checks an unpacked bundle (dir may be a symlink such as
// /opt/plinth/bundle/current): every SHA256SUMS line matches its file, every file is
// listed, every manifest component's sum and size match, and the component
// directories hold nothing the manifest does not list. It returns the manifest if
// all is well and a *VerifyError naming each problem otherwise.
func Verify(dir string) (Manifest, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("bundle: %w: %s", err, Remedy)
	}
	c := newContents()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			c.problems = append(c.problems, Problem{rel, fmt.Sprintf("is a %s; a bundle holds only regular files and directories", d.Type())})
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		defer f.Close()
		return c.add(rel, f)
	})
	if err != nil {
		return Manifest{}, err
	}
	return c.check(dir, "")
}

// VerifyArchive checks a bundle archive as `make bundle` wrote it, without unpacking
// it: the same checks as Verify, plus that every entry is under the one top
// directory plinth-bundle-<version>/ and is a regular file or directory (no links,
// no devices, no paths climbing out).
func VerifyArchive(tarPath string) (Manifest, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return Manifest{}, fmt.Errorf("bundle: %w: %s", err, Remedy)
	}
	defer f.Close()
	c := newContents()
	top := ""
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			c.problems = append(c.problems, Problem{tarPath, fmt.Sprintf("is not a complete tar archive (%v)", err)})
			break
		}
		name := strings.TrimSuffix(h.Name, "/")
		first, rel, _ := strings.Cut(name, "/")
		if top == "" {
			top = first
		}
		if first != top || !strings.HasPrefix(top, namePrefix) {
			c.problems = append(c.problems, Problem{h.Name, fmt.Sprintf("is outside the archive's top directory (want every entry under %s<version>/)", namePrefix)})
			continue
		}
		if rel == "" {
			continue // the top directory itself
		}
		if err := checkPath(rel); err != nil {
			c.problems = append(c.problems, Problem{h.Name, err.Error()})
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			if err := c.add(rel, tr); err != nil {
				c.problems = append(c.problems, Problem{rel, fmt.Sprintf("cannot be read: %v (archive truncated?)", err)})
			}
		default:
			c.problems = append(c.problems, Problem{rel, fmt.Sprintf("is a %s in the archive; a bundle holds only regular files and directories", entryType(h.Typeflag))})
		}
	}
	return c.check(tarPath, top)
}

// check compares what was read with SHA256SUMS and the manifest. top, for an archive,
// is its top directory, which must name the manifest's version.
func (c *contents) check(bundle, top string) (Manifest, error) {
	probs := c.problems
	add := func(p, format string, a ...any) { probs = append(probs, Problem{p, fmt.Sprintf(format, a...)}) }

	var m Manifest
	manifestOK := false
	switch {
	case c.manifest == nil:
		add(ManifestFile, "is missing")
	default:
		var err error
		if m, err = decodeManifest(c.manifest); err != nil {
			add(ManifestFile, "%v", err)
		} else {
			manifestOK = true
		}
	}
	var sums map[string]string
	if c.sums == nil {
		add(SumsFile, "is missing")
	} else {
		var err error
		if sums, err = parseSums(c.sums); err != nil {
			add(SumsFile, "%v", err)
		}
	}
	if manifestOK && top != "" && top != TopDir(m.Version) {
		add(top+"/", "top directory does not match the manifest's version %q (want %s/)", m.Version, TopDir(m.Version))
	}

	if sums != nil {
		for _, p := range sortedKeys(sums) {
			got, ok := c.files[p]
			switch {
			case !ok:
				add(p, "is missing (listed in %s)", SumsFile)
			case got.sha256 != sums[p]:
				add(p, "sha256 is %s, %s expects %s (file corrupted or changed)", got.sha256, SumsFile, sums[p])
			}
		}
		if _, ok := sums[ManifestFile]; !ok {
			add(ManifestFile, "is not listed in %s", SumsFile)
		}
		for _, p := range sortedKeys(c.files) {
			if _, listed := sums[p]; !listed && p != SumsFile {
				add(p, "is not listed in %s (a bundle holds only the files it lists)", SumsFile)
			}
		}
	}

	if manifestOK {
		inManifest := map[string]bool{}
		for _, comp := range m.Components {
			inManifest[comp.Path] = true
			got, ok := c.files[comp.Path]
			if !ok {
				if sums == nil || sums[comp.Path] != "" {
					add(comp.Path, "is missing (%s %s in the manifest)", comp.Kind, comp.Name)
				} else {
					add(comp.Path, "is missing and not listed in %s (%s %s in the manifest)", SumsFile, comp.Kind, comp.Name)
				}
				continue
			}
			if got.size != comp.Size {
				add(comp.Path, "size is %d bytes, the manifest expects %d (file truncated or changed)", got.size, comp.Size)
			}
			if got.sha256 != comp.SHA256 {
				add(comp.Path, "sha256 is %s, the manifest expects %s (file corrupted or changed)", got.sha256, comp.SHA256)
			}
		}
		for _, p := range sortedKeys(c.files) {
			if _, isKindDir := dirKinds[path.Dir(p)]; isKindDir && !inManifest[p] {
				add(p, "is in %s/ but not in the manifest", path.Dir(p))
			}
		}
	}
	if len(probs) > 0 {
		return Manifest{}, &VerifyError{Bundle: bundle, Problems: probs}
	}
	return m, nil
}

// entryType names a tar entry type for an error message.
func entryType(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "fifo"
	}
	return fmt.Sprintf("entry of tar type %q", t)
}

// dirKinds maps each component directory back to its kind.
var dirKinds = func() map[string]Kind {
	out := map[string]Kind{}
	for k, d := range kindDirs {
		out[d] = k
	}
	return out
}()

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// decodeManifest parses manifest.json strictly and validates it.
func decodeManifest(data []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return Manifest{}, fmt.Errorf("is truncated (%d bytes, JSON ends early)", len(data))
		case errors.As(err, &se):
			return Manifest{}, fmt.Errorf("is not valid JSON at byte %d: %v", se.Offset, err)
		}
		return Manifest{}, fmt.Errorf("cannot be decoded: %v", err)
	}
	if dec.More() {
		return Manifest{}, fmt.Errorf("has data after the JSON object")
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, fmt.Errorf("is not valid: %w", err)
	}
	return m, nil
}
