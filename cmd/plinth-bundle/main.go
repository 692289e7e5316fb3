// Command plinth-bundle assembles, verifies and shows site bundles (pkg/bundle):
// scripts/build-bundle.sh (make bundle) uses it to read the pinned upstream versions
// and to write and check the archive; an operator uses it to check a copy and to
// read the manifest's SHA-256 a site pins.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/output"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "plinth-bundle",
		Short:         "Assemble, verify and show Plinth site bundles",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newAssemble(), newVerify(), newShow(), newPins())
	return root
}

func newAssemble() *cobra.Command {
	var from, out, version, plinthVersion string
	cmd := &cobra.Command{
		Use:   "assemble --from STAGE --out DIR",
		Short: "Write DIR/plinth-bundle-VERSION.tar from the parts staged in STAGE",
		Long: `assemble reads STAGE, laid out as the bundle is (bin/, cni/, images/, debs/ and
optionally install.sh; symlinks to cached files are fine), checks that it holds
exactly the pinned components (plinth-bundle pins) and the two Plinth packages of one
Debian version, and writes DIR/plinth-bundle-VERSION.tar with manifest.json and
SHA256SUMS, and DIR/plinth-bundle-VERSION.tar.sha256 beside it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := stagedSpec(from, version, plinthVersion)
			if err != nil {
				return err
			}
			m, tarPath, err := bundle.Assemble(cmd.Context(), spec, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: bundle %s, %d components\n", tarPath, m.Version, len(m.Components))
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "staging directory laid out as the bundle (required)")
	cmd.Flags().StringVar(&out, "out", "dist", "directory to write the archive into")
	cmd.Flags().StringVar(&version, "version", "", "bundle version (default: the Plinth packages' Debian version)")
	cmd.Flags().StringVar(&plinthVersion, "plinth-version", "", "Plinth version recorded in the manifest (default: the packages' Debian version)")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

var debRE = regexp.MustCompile(`^(plinth-agent|plinth-coordinator)_([0-9A-Za-z.+~-]+)_amd64\.deb$`)

// stagedSpec turns a staging directory into an assembly spec, refusing anything
// missing or unexpected so nothing slips into a bundle unlisted.
func stagedSpec(stage, version, plinthVersion string) (bundle.Spec, error) {
	debs, err := os.ReadDir(filepath.Join(stage, bundle.DebDir))
	if err != nil {
		return bundle.Spec{}, fmt.Errorf("assemble: %w: stage the Plinth packages (make packages) in %s/", err, bundle.DebDir)
	}
	debVersion := ""
	found := map[string]bool{}
	for _, d := range debs {
		mm := debRE.FindStringSubmatch(d.Name())
		if mm == nil {
			return bundle.Spec{}, fmt.Errorf("assemble: %s/%s is not plinth-agent_<version>_amd64.deb or plinth-coordinator_<version>_amd64.deb", bundle.DebDir, d.Name())
		}
		if debVersion != "" && mm[2] != debVersion {
			return bundle.Spec{}, fmt.Errorf("assemble: %s/ holds packages of two versions (%s and %s): stage one build", bundle.DebDir, debVersion, mm[2])
		}
		debVersion = mm[2]
		found[mm[1]] = true
	}
	for _, n := range []string{bundle.AgentDeb, bundle.CoordinatorDeb} {
		if !found[n] {
			return bundle.Spec{}, fmt.Errorf("assemble: %s/ has no %s package: run make packages", bundle.DebDir, n)
		}
	}
	if plinthVersion == "" {
		plinthVersion = debVersion
	}
	if version == "" {
		version = debVersion
	}
	if err := bundle.CheckVersion(version); err != nil {
		return bundle.Spec{}, fmt.Errorf("assemble: --version: %w", err)
	}
	spec := bundle.Spec{Version: version, PlinthVersion: plinthVersion, KubernetesVersion: bundle.DefaultPins.Kubernetes}
	want := map[string]bool{}
	for _, c := range append(bundle.DebComponents(debVersion), bundle.DefaultPins.Components()...) {
		src := filepath.Join(stage, filepath.FromSlash(c.Path))
		if _, err := os.Stat(src); err != nil {
			return bundle.Spec{}, fmt.Errorf("assemble: %s %s: %w", c.Kind, c.Name, err)
		}
		spec.Parts = append(spec.Parts, bundle.Part{Component: c, Source: src})
		want[c.Path] = true
	}
	inst := filepath.Join(stage, bundle.InstallScript)
	if _, err := os.Stat(inst); err == nil {
		spec.Extras = append(spec.Extras, bundle.Extra{Path: bundle.InstallScript, Source: inst, Mode: 0o755})
		want[bundle.InstallScript] = true
	}
	err = filepath.WalkDir(stage, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(stage, p)
		if !want[filepath.ToSlash(rel)] {
			return fmt.Errorf("assemble: %s in the staging directory is not a bundle component (plinth-bundle pins lists them)", rel)
		}
		return nil
	})
	return spec, err
}

func newVerify() *cobra.Command {
	return &cobra.Command{
		Use:   "verify FILE|DIR",
		Short: "Check a bundle archive or an unpacked bundle against its SHA256SUMS and manifest",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := verify(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: bundle %s verified: %d components, every file matches SHA256SUMS\n", args[0], m.Version, len(m.Components))
			return nil
		},
	}
}

func verify(p string) (bundle.Manifest, error) {
	st, err := os.Stat(p)
	if err != nil {
		return bundle.Manifest{}, err
	}
	if st.IsDir() {
		return bundle.Verify(p)
	}
	return bundle.VerifyArchive(p)
}

// shown is what `show` prints: the manifest and the digest a site pins.
type shown struct {
	ManifestSHA256 string          `json:"manifestSHA256"`
	Manifest       bundle.Manifest `json:"manifest"`
}

func newShow() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "show FILE|DIR",
		Aliases: []string{"manifest"},
		Short:   "Print a bundle's manifest and its SHA-256 (spec.kubernetes.bundle.sha256)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var s shown
			var err error
			if st, serr := os.Stat(args[0]); serr == nil && st.IsDir() {
				s.Manifest, s.ManifestSHA256, err = bundle.Read(args[0])
			} else {
				s.Manifest, s.ManifestSHA256, err = bundle.ReadArchive(args[0])
			}
			if err != nil {
				return err
			}
			if format == "json" || format == "yaml" {
				return output.Emit(cmd.OutOrStdout(), format, s, nil)
			}
			m := s.Manifest
			fmt.Fprintf(cmd.OutOrStdout(), "bundle %s  plinth %s  kubernetes %s\nmanifest sha256 %s\n\n", m.Version, m.PlinthVersion, m.KubernetesVersion, s.ManifestSHA256)
			return output.Emit(cmd.OutOrStdout(), format, s, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "KIND\tNAME\tVERSION\tSIZE\tPATH\tIMAGE")
				for _, c := range m.Components {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Kind, c.Name, c.Version, mib(c.Size), c.Path, c.Image)
				}
			})
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "table", "output format: "+strings.Join(output.Formats, ", "))
	return cmd
}

func mib(n int64) string { return fmt.Sprintf("%.1fM", float64(n)/(1<<20)) }

func newPins() *cobra.Command {
	return &cobra.Command{
		Use:   "pins",
		Short: "Print the pinned upstream versions as NAME=VALUE lines (for scripts/build-bundle.sh)",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			p := bundle.DefaultPins
			for _, kv := range [][2]string{
				{"KUBERNETES", p.Kubernetes}, {"ETCD", p.Etcd}, {"CNI_PLUGINS", p.CNIPlugins},
				{"COREDNS", p.CoreDNS}, {"PAUSE", p.Pause}, {"HELLO", p.Hello}, {"FLANNEL", p.Flannel},
				{"IMAGE_REGISTRY", bundle.ImageRegistry},
			} {
				fmt.Fprintf(cmd.OutOrStdout(), "%s=%s\n", kv[0], kv[1])
			}
		},
	}
}
