package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/goreleaser/chglog"
	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

// options are the inputs of one build of all packages.
type options struct {
	Repo    string    // repository root: systemd/ and packaging/debian/ are read from here
	BinDir  string    // where make build put the binaries
	OutDir  string    // where the .debs go
	Version string    // Debian version, already checked
	Date    time.Time // file times and the changelog date (the commit's, for reproducible builds)
}

func (o options) debianDir() string { return filepath.Join(o.Repo, "packaging", "debian") }

// debFile is where p's package is written.
func (o options) debFile(p pkg) string {
	return filepath.Join(o.OutDir, fmt.Sprintf("%s_%s_%s.deb", p.Name, o.Version, arch))
}

// buildAll writes every package and returns their paths.
func buildAll(ctx context.Context, o options) ([]string, error) {
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("packaging: %w", err)
	}
	var out []string
	for _, p := range packages {
		path, err := build(ctx, o, p)
		if err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

// build writes p's .deb: the work files (stripped binary, rendered scripts,
// changelog) live in a temporary directory removed afterwards.
func build(ctx context.Context, o options, p pkg) (string, error) {
	work, err := os.MkdirTemp("", "plinth-packaging-")
	if err != nil {
		return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
	}
	defer os.RemoveAll(work)

	var libs []string
	var contents files.Contents
	for _, prog := range p.programs() {
		bin := filepath.Join(o.BinDir, prog.Name)
		l, err := shlibDepends(bin)
		if err != nil {
			return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
		}
		libs = append(libs, l...)
		stripped := filepath.Join(work, prog.Name)
		if err := strip(ctx, bin, stripped); err != nil {
			return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
		}
		contents = append(contents, &files.Content{Source: stripped, Destination: prog.Dst, FileInfo: mode(0o755)})
	}
	slices.Sort(libs)
	libs = slices.Compact(libs)
	unitSrc := filepath.Join(o.Repo, "systemd", p.Unit)
	wantedBy, err := unitWantedBy(unitSrc)
	if err != nil {
		return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
	}
	scripts, err := renderScripts(o.debianDir(), work, p, wantedBy)
	if err != nil {
		return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
	}
	changelog := filepath.Join(work, "changelog.gz")
	if err := writeChangelog(changelog, p, o); err != nil {
		return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
	}

	doc := "/usr/share/doc/" + p.Name
	contents = append(contents, files.Contents{
		{Source: unitSrc, Destination: filepath.Join(unitDir, p.Unit), FileInfo: mode(0o644)},
		{Source: filepath.Join(o.debianDir(), "copyright"), Destination: doc + "/copyright", FileInfo: mode(0o644)},
		{Source: changelog, Destination: doc + "/changelog.gz", FileInfo: mode(0o644)},
	}...)
	for _, c := range p.Conffiles {
		contents = append(contents, &files.Content{
			Source: filepath.Join(o.debianDir(), c.Src), Destination: c.Dst,
			Type: files.TypeConfig, FileInfo: mode(0o644),
		})
	}
	info := &nfpm.Info{
		Name:     p.Name,
		Arch:     arch,
		Platform: "linux",
		Version:  o.Version,
		// Use the version exactly as given: nfpm would otherwise reparse it as semver.
		VersionSchema: "none",
		Section:       section,
		Priority:      priority,
		Maintainer:    maintainer,
		Homepage:      homepage,
		License:       "Apache-2.0",
		Description:   p.Summary + "\n" + p.Description,
		MTime:         o.Date,
		Overridables: nfpm.Overridables{
			Depends:    append(libs, p.Depends...),
			Recommends: p.Recommends,
			Suggests:   p.Suggests,
			Contents:   contents,
			Umask:      0o022,
			Scripts: nfpm.Scripts{
				PostInstall: scripts["postinst"],
				PreRemove:   scripts["prerm"],
				PostRemove:  scripts["postrm"],
			},
			// xz: Debian's default and the smallest (agent: 20.5 MiB, about 25 s);
			// lintian on bookworm refuses zstd (malformed-deb-archive).
			Deb: nfpm.Deb{Compression: "xz"},
		},
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
	}
	path := o.debFile(p)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
	}
	defer os.Remove(tmp)
	if err := deb.Default.Package(info, f); err != nil {
		f.Close()
		return "", fmt.Errorf("packaging: %s: nfpm: %w", p.Name, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
	}
	// One package per name in the output directory, so that whatever picks
	// dist/plinth-agent_*.deb (the bundle) gets this build.
	old, err := filepath.Glob(filepath.Join(o.OutDir, p.Name+"_*_"+arch+".deb"))
	if err != nil {
		return "", fmt.Errorf("packaging: %s: %w", p.Name, err)
	}
	for _, f := range old {
		if f != path {
			if err := os.Remove(f); err != nil {
				return "", fmt.Errorf("packaging: %s: remove the previous build: %w", p.Name, err)
			}
		}
	}
	return path, nil
}

func mode(m os.FileMode) *files.ContentFileInfo {
	return &files.ContentFileInfo{Mode: m, Owner: "root", Group: "root"}
}

// shlibDepends returns the Depends entries for the shared libraries bin links.
func shlibDepends(bin string) ([]string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, fmt.Errorf("read %s (run make build first): %w", bin, err)
	}
	defer f.Close()
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("%s: shared libraries: %w", bin, err)
	}
	var deps []string
	for _, lib := range needed {
		d, ok := shlibs[lib]
		if !ok {
			return nil, fmt.Errorf("%s links %s, which has no Debian package in packaging/packages.go's shlibs table; add it (dpkg -S %s, dpkg-shlibdeps)", bin, lib, lib)
		}
		if !slices.Contains(deps, d) {
			deps = append(deps, d)
		}
	}
	slices.Sort(deps)
	return deps, nil
}

// strip copies bin to dst without symbols and debug sections, as dh_strip does
// (Debian policy 10.1; lintian: unstripped-binary-or-object).
func strip(ctx context.Context, bin, dst string) error {
	out, err := exec.CommandContext(ctx, "strip", "--strip-unneeded", "--remove-section=.comment",
		"--remove-section=.note", "-o", dst, bin).CombinedOutput()
	if err != nil {
		return fmt.Errorf("strip %s: %w: %s (strip comes with binutils)", bin, err, bytes.TrimSpace(out))
	}
	return nil
}

// unitWantedBy returns the targets in the unit's [Install] WantedBy=: purge removes
// the enablement links systemctl enable made there.
func unitWantedBy(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var targets []string
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Install]" && strings.HasPrefix(line, "WantedBy="):
			targets = append(targets, strings.Fields(strings.TrimPrefix(line, "WantedBy="))...)
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("%s: no WantedBy= in [Install]: the unit could not be enabled", path)
	}
	return targets, nil
}

// scriptData is what the maintainer script templates see.
type scriptData struct {
	pkg
	WantedBy []string
}

// renderScripts renders debian/{postinst,prerm,postrm}.tmpl for p into work and
// returns their paths by name.
func renderScripts(debianDir, work string, p pkg, wantedBy []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range []string{"postinst", "prerm", "postrm"} {
		src := filepath.Join(debianDir, name+".tmpl")
		t, err := template.New(name + ".tmpl").Option("missingkey=error").ParseFiles(src)
		if err != nil {
			return nil, fmt.Errorf("maintainer script template: %w", err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, scriptData{pkg: p, WantedBy: wantedBy}); err != nil {
			return nil, fmt.Errorf("render %s: %w", src, err)
		}
		dst := filepath.Join(work, name)
		if err := os.WriteFile(dst, b.Bytes(), 0o755); err != nil {
			return nil, err
		}
		out[name] = dst
	}
	return out, nil
}

// writeChangelog writes /usr/share/doc/<name>/changelog.gz: one entry for this build
// in Debian's changelog format (rendered by chglog, nfpm's changelog library).
// nfpm's own changelog option names the file changelog.Debian.gz, which is the name
// for non-native packages; Plinth's are native (lintian:
// wrong-name-for-changelog-of-native-package).
func writeChangelog(path string, p pkg, o options) error {
	log := &chglog.PackageChangeLog{Name: p.Name, Entries: chglog.ChangeLogEntries{{
		ChangeLogOverridables: chglog.ChangeLogOverridables{
			Deb: &chglog.ChangelogDeb{Urgency: "medium", Distributions: []string{"unstable"}},
		},
		Semver:   o.Version,
		Date:     o.Date,
		Packager: maintainer,
		Changes:  chglog.ChangeLogChanges{{Note: "Build of " + o.Version + "; see " + homepage + "."}},
	}}}
	tpl, err := chglog.DebTemplate()
	if err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	text, err := chglog.FormatChangelog(log, tpl)
	if err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	var b bytes.Buffer
	// Maximum compression, no name and no time in the header, as gzip -9n.
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	if _, err := io.WriteString(zw, strings.TrimSpace(text)+"\n"); err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
