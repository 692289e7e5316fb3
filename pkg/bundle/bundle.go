// Package bundle is the one home of the site bundle's format: the offline archive an
// air-gapped site copies to its first host, holding the Plinth Debian packages, the
// Kubernetes and etcd binaries, the CNI plugins and every container image the site
// needs. It defines the layout (directory and file names, where hosts unpack it), the
// manifest (versions, SHA-256 sums and sizes of every component), the upstream
// versions a bundle is built from, how a bundle is assembled into its tar, and how a
// copy is verified before anything from it is installed.
//
// It uses the standard library only, so that the agent, the coordinator, the lab and
// the build tool can all import it. It never installs anything: the install script
// unpacks a bundle and Plinth steps (kube.binaries, images.import) install from it,
// looking components up here by kind and name.
package bundle

import (
	"fmt"
	"path"
	"regexp"
	"sync"
)

// Where hosts keep bundles: DefaultRoot/<version>/, with DefaultRoot/current a
// symlink to the version in use, so an upgrade unpacks beside the old one and flips
// the link.
const (
	DefaultRoot = "/opt/plinth/bundle"
	CurrentLink = "current"
)

// Files and directories inside a bundle, relative to its top directory.
const (
	ManifestFile  = "manifest.json"
	SumsFile      = "SHA256SUMS" // `sha256sum -c` format, every file but itself
	InstallScript = "install.sh"
	DebDir        = "debs"
	BinDir        = "bin"
	CNIDir        = "cni"
	ImageDir      = "images"
)

// ImageRegistry is the registry name every bundled image is tagged with. Nothing
// serves it: images are imported from their archives, so the name only has to be
// the one kubeadm and the kubelet are configured to use (imageRepository).
const ImageRegistry = "registry.local"

// namePrefix starts both the archive's file name and its top directory.
const namePrefix = "plinth-bundle-"

// TopDir is the single top-level directory inside the archive of a bundle version.
func TopDir(version string) string { return namePrefix + version }

// ArchiveName is the file name `make bundle` writes for a bundle version.
func ArchiveName(version string) string { return TopDir(version) + ".tar" }

// ImageRef is the reference a bundled image archive is tagged with.
func ImageRef(name, tag string) string { return ImageRegistry + "/" + name + ":" + tag }

// VersionDir is where a bundle version is unpacked under root (DefaultRoot on hosts).
func VersionDir(root, version string) string { return path.Join(root, version) }

// CurrentDir is the bundle in use under root, through the CurrentLink symlink.
func CurrentDir(root string) string { return path.Join(root, CurrentLink) }

// Kind says what a component is and so which directory holds it and who installs it.
type Kind string

const (
	KindBinary Kind = "binary" // bin/: installed into /usr/local/bin by kube.binaries
	KindCNI    Kind = "cni"    // cni/: installed into /opt/cni/bin
	KindImage  Kind = "image"  // images/: docker-archive tarballs imported by images.import
	KindDeb    Kind = "deb"    // debs/: installed by the install script
)

// kindDirs maps each kind to its directory; a component's path must be directly in it.
var kindDirs = map[Kind]string{KindBinary: BinDir, KindCNI: CNIDir, KindImage: ImageDir, KindDeb: DebDir}

// Dir is the bundle directory holding components of kind k ("" for an unknown kind).
func (k Kind) Dir() string { return kindDirs[k] }

// Manifest is manifest.json: what a bundle holds, at which versions, with the sum and
// size of every component so a host can check its copy and a step can plan a version
// change as a visible change of its inputs.
type Manifest struct {
	Version           string      `json:"version"`
	PlinthVersion     string      `json:"plinthVersion"`
	KubernetesVersion string      `json:"kubernetesVersion"`
	Components        []Component `json:"components"`
}

// Component is one file of a bundle that something installs.
type Component struct {
	Name    string `json:"name"`
	Kind    Kind   `json:"kind"`
	Version string `json:"version"`
	// Path is relative to the bundle's top directory, slash-separated: bin/kubelet.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Image is the reference the archive is tagged with (images only).
	Image string `json:"image,omitempty"`
}

// Find returns the component of kind k named name, or an error naming what the
// bundle does hold of that kind.
func (m Manifest) Find(k Kind, name string) (Component, error) {
	var names []string
	for _, c := range m.Components {
		if c.Kind == k {
			if c.Name == name {
				return c, nil
			}
			names = append(names, c.Name)
		}
	}
	return Component{}, fmt.Errorf("bundle %s: no %s component %q (it has %v): use a bundle built for this Plinth version", m.Version, k, name, names)
}

// OfKind lists the components of kind k in manifest order.
func (m Manifest) OfKind(k Kind) []Component {
	var out []Component
	for _, c := range m.Components {
		if c.Kind == k {
			out = append(out, c)
		}
	}
	return out
}

// The patterns compile on first use, not at package init: every drivers process (one
// per step and drift pass) links this package, and compiling them at start cost each
// about 0.7 ms and 140 KB of allocations.
var (
	versionRE = lazyRE(`^[0-9A-Za-z][0-9A-Za-z.+~_-]{0,127}$`)
	nameRE    = lazyRE(`^[a-z0-9][a-z0-9._-]*$`)
	sha256RE  = lazyRE(`^[0-9a-f]{64}$`)
	// pathRE keeps bundle paths free of anything sha256sum would escape or a shell
	// would split.
	pathRE = lazyRE(`^[0-9A-Za-z._+~/-]+$`)
)

func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// CheckVersion says whether v can name a bundle: it becomes a directory name on
// every host.
func CheckVersion(v string) error {
	if !versionRE().MatchString(v) {
		return fmt.Errorf("bundle version %q is not valid: use at most 128 letters, digits and . + ~ _ - (e.g. 0.1.0+git12.abc1234)", v)
	}
	return nil
}

// checkPath refuses a bundle-relative path that is absolute, unclean, climbs out with
// "..", or holds characters a bundle never uses.
func checkPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("empty path")
	case path.IsAbs(p):
		return fmt.Errorf("path %q is absolute; bundle paths are relative to its top directory", p)
	case !pathRE().MatchString(p):
		return fmt.Errorf("path %q has characters a bundle never uses (want letters, digits, . _ + ~ - /)", p)
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (want %q)", p, path.Clean(p))
	case p == ".." || len(p) > 2 && (p[:3] == "../"):
		return fmt.Errorf("path %q escapes the bundle directory", p)
	}
	return nil
}

// Validate checks the manifest's own fields (errors name the field, e.g.
// components[3] (kubelet).sha256): versions, unique kind/name and paths,
// each path directly in its kind's directory, well-formed sums and sizes.
func (m Manifest) Validate() error {
	if err := CheckVersion(m.Version); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if m.PlinthVersion == "" {
		return fmt.Errorf("plinthVersion is empty")
	}
	if m.KubernetesVersion == "" {
		return fmt.Errorf("kubernetesVersion is empty")
	}
	if len(m.Components) == 0 {
		return fmt.Errorf("components is empty")
	}
	seen, paths := map[string]bool{}, map[string]bool{}
	for i, c := range m.Components {
		f := fmt.Sprintf("components[%d]", i)
		if !nameRE().MatchString(c.Name) {
			return fmt.Errorf("%s.name: %q is not valid (want lower-case letters, digits, . _ -)", f, c.Name)
		}
		f = fmt.Sprintf("%s (%s)", f, c.Name)
		dir := c.Kind.Dir()
		if dir == "" {
			return fmt.Errorf("%s.kind: %q is not valid: want binary, cni, image or deb", f, c.Kind)
		}
		if c.Version == "" {
			return fmt.Errorf("%s.version is empty", f)
		}
		if err := checkPath(c.Path); err != nil {
			return fmt.Errorf("%s.path: %w", f, err)
		}
		if path.Dir(c.Path) != dir {
			return fmt.Errorf("%s.path: %q is not directly in %s/, where %s components live", f, c.Path, dir, c.Kind)
		}
		if !sha256RE().MatchString(c.SHA256) {
			return fmt.Errorf("%s.sha256: %q is not 64 lower-case hex digits", f, c.SHA256)
		}
		if c.Size < 0 {
			return fmt.Errorf("%s.size: %d is negative", f, c.Size)
		}
		if (c.Kind == KindImage) != (c.Image != "") {
			return fmt.Errorf("%s.image: %q: images (and only images) name the reference they are tagged with", f, c.Image)
		}
		key := string(c.Kind) + "/" + c.Name
		if seen[key] {
			return fmt.Errorf("%s: a second %s named %q", f, c.Kind, c.Name)
		}
		if paths[c.Path] {
			return fmt.Errorf("%s.path: %q is used by another component", f, c.Path)
		}
		seen[key], paths[c.Path] = true, true
	}
	return nil
}
