package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/plinth-dev/plinth/pkg/atomicfile"
	"github.com/plinth-dev/plinth/pkg/bundle"
	"github.com/plinth-dev/plinth/pkg/state"
)

// agentConfig is /etc/plinth/agent.yaml on lab hosts: the fast gossip profile and
// short facts interval make the demo and the tests quick, and the nspawn-lab host
// profile (pkg/hostprofile) is what booted lab hosts force on containerd and
// kubeadm; real sites keep the package's defaults.
const agentConfig = `# plinth-agent settings for lab hosts (pkg/lab).
gossipProfile: fast
factsInterval: 5s
logLevel: debug
hostProfile: nspawn-lab
`

// adminIdentityInHost is where install.sh --init leaves the admin identity.
const adminIdentityInHost = "/root/.plinth/admin.json"

func (l *Lab) shareDir() string { return filepath.Join(l.Dir, "share") }

// writeShare writes the files every host sees read-only under ShareMount.
func (l *Lab) writeShare() error {
	if err := os.MkdirAll(filepath.Join(l.shareDir(), "tokens"), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(l.shareDir(), "agent.yaml"), []byte(agentConfig), 0o644)
}

// tokenFile asks the coordinators for a one-time token for host name in role, keeps
// it in the share (0600, never on a command line) and returns its path inside hosts.
func (l *Lab) tokenFile(ctx context.Context, name, role string) (string, error) {
	tok, err := l.CLI(ctx, "node", "enroll", name, "--role", role, "--ttl", "10m")
	if err != nil {
		return "", err
	}
	file := name + "-" + role + ".token"
	if err := atomicfile.WriteFile(filepath.Join(l.shareDir(), "tokens", file), []byte(strings.TrimSpace(tok)+"\n"), 0o600); err != nil {
		return "", err
	}
	return ShareMount + "/tokens/" + file, nil
}

// install runs the bundle's install script inside h, logging to logs/install-<host>.log.
func (l *Lab) install(ctx context.Context, h *Host, args ...string) error {
	logPath := filepath.Join(l.Dir, "logs", "install-"+h.Name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	out, err := l.Exec(ctx, h, "bash", append([]string{installScript}, args...)...)
	f, ferr := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if ferr == nil {
		fmt.Fprintf(f, "$ install.sh %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(f, "%v\n", err)
		}
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("lab: install.sh on %s: %w\n%s(log %s)", h.Name, err, out, logPath)
	}
	return nil
}

// Install re-runs the install script on h with args (tests: idempotence, bad input).
func (l *Lab) Install(ctx context.Context, h *Host, args ...string) (string, error) {
	out, err := l.Exec(ctx, h, "bash", append([]string{installScript}, args...)...)
	return out, err
}

// copyAdminIdentity takes the admin identity install.sh --init made on h.
func (l *Lab) copyAdminIdentity(h *Host) error {
	b, err := os.ReadFile(filepath.Join(h.Machine.Root(), adminIdentityInHost))
	if err != nil {
		return fmt.Errorf("lab: admin identity from %s: %w", h.Name, err)
	}
	return atomicfile.WriteFile(l.Identity, b, 0o600)
}

// UnpackBundle unpacks a site bundle archive into dir (once per version) and returns
// the bundle's directory, which every host mounts read-only at BundleMount. A
// directory is used as it is. The install script inside each host verifies it.
func UnpackBundle(ctx context.Context, archive, dir string) (string, error) {
	if archive == "" {
		return "", fmt.Errorf("lab: no site bundle: build one with `make bundle` and pass --bundle dist/plinth-bundle-VERSION.tar")
	}
	st, err := os.Stat(archive)
	if err != nil {
		return "", fmt.Errorf("lab: site bundle: %w (make bundle builds it)", err)
	}
	if st.IsDir() {
		return filepath.Abs(archive)
	}
	m, _, err := bundle.ReadArchive(archive)
	if err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	top := filepath.Join(dir, bundle.TopDir(m.Version))
	if _, err := os.Stat(filepath.Join(top, bundle.SumsFile)); err == nil {
		return top, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Unpacked beside its place and renamed into it: a run killed half-way leaves
	// no directory that looks whole to the next one.
	tmp, err := os.MkdirTemp(dir, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("lab: unpack %s: %w", archive, err)
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.CommandContext(ctx, "tar", "-C", tmp, "-xf", archive).CombinedOutput(); err != nil {
		return "", fmt.Errorf("lab: unpack %s: %w: %s", archive, err, out)
	}
	if _, err := os.Stat(filepath.Join(top, bundle.SumsFile)); err == nil {
		return top, nil // another run unpacked it meanwhile
	}
	_ = os.RemoveAll(top) // what a killed unpack of an older Plinth left
	if err := os.Rename(filepath.Join(tmp, bundle.TopDir(m.Version)), top); err != nil {
		if _, serr := os.Stat(filepath.Join(top, bundle.SumsFile)); serr == nil {
			return top, nil
		}
		return "", fmt.Errorf("lab: unpack %s: %w", archive, err)
	}
	return top, nil
}

// withBundle writes a copy of the manifest with ${BUNDLE_VERSION} and ${BUNDLE_SHA256}
// set to the bundle the lab's hosts installed (what an operator copies from
// `plinth-bundle show`), and returns its path; other text is left as it is.
func (l *Lab) withBundle(manifest string) (string, error) {
	b, err := os.ReadFile(manifest)
	if err != nil {
		return "", fmt.Errorf("lab: manifest: %w", err)
	}
	if !strings.Contains(string(b), "${BUNDLE_") {
		return manifest, nil
	}
	m, sum, err := bundle.Read(l.BundleDir)
	if err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	out := strings.NewReplacer("${BUNDLE_VERSION}", m.Version, "${BUNDLE_SHA256}", sum).Replace(string(b))
	p := filepath.Join(l.Dir, filepath.Base(manifest))
	return p, atomicfile.WriteFile(p, []byte(out), 0o644)
}

// Kubeconfig writes the site's admin kubeconfig (through the control-plane VIP,
// which the lab bridge reaches) to Dir/kubeconfig and returns its path and the
// bundle's kubectl; ok is false when the site declares no Kubernetes.
func (l *Lab) Kubeconfig(ctx context.Context) (kubeconfig, kubectl string, ok bool, err error) {
	cl, err := l.Client()
	if err != nil {
		return "", "", false, err
	}
	var site *state.SiteRecord
	if _, err := cl.Do(ctx, "GET", "/v1/site?consistent", nil, &site); err != nil {
		return "", "", false, fmt.Errorf("lab: read the site: %w", err)
	}
	if site == nil || site.Site.Spec.Kubernetes == nil {
		return "", "", false, nil
	}
	kubeconfig = filepath.Join(l.Dir, "kubeconfig")
	if _, err := l.CLI(ctx, "kubeconfig", "--write", kubeconfig); err != nil {
		return "", "", false, err
	}
	return kubeconfig, filepath.Join(l.BundleDir, bundle.BinDir, "kubectl"), true, nil
}
