package nspawn

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/plinth-dev/plinth/pkg/hostprofile"
)

// profileFiles are the lab profile's files, copied into the lab rootfs as they are
// laid out under profile/root.
//
//go:embed all:profile/root
var profileFiles embed.FS

// RuncWrapperPath is where a booted lab host has the runc wrapper (cmd/runc-lab):
// the agent's host profile nspawn-lab (pkg/hostprofile) names it as containerd's
// runc binary.
const RuncWrapperPath = hostprofile.RuncLab

// Profile is what a machine forces on the hosts booted on it: files and unit
// masks baked into the rootfs, and systemd-nspawn's environment and flags. It is a
// named setting of the lab, never a default for real hosts.
type Profile struct {
	// Name shows in the rootfs cache key and in errors.
	Name string
	// Files are copied into the rootfs (paths relative to the FS root). Files
	// under usr/local/sbin and usr/local/bin are made executable.
	Files fs.FS `json:"-"`
	// Enable links units of Files into <target>.wants: unit -> target.
	Enable map[string]string
	// Mask are units masked in the rootfs (linked to /dev/null), whether or not a
	// package ships them: they fail or make no sense in a container here.
	Mask []string
	// Env is added to systemd-nspawn's environment.
	Env []string
	// Args are systemd-nspawn flags added to every boot.
	Args []string
}

// LabProfile is this machine's profile (kernel 6.18, cgroup v1 with name=systemd
// and a cgroup2 at /sys/fs/cgroup/unified, no systemd as PID 1, no
// CAP_SYS_RESOURCE), each setting proven in ../shared/recipes/kubelet-in-nspawn.md:
//
//   - plinth-lab-prep.service (sysinit, before containerd and kubelet): remounts
//     the cgroup controllers rw (nspawn mounts them ro) and bind-mounts files
//     holding 1, 10, 1 over /proc/sys/vm/overcommit_memory, kernel/panic and
//     kernel/panic_on_oops, so kubelet sees what it wants and the machine's values
//     never change. containerd and kubelet drop-ins require it.
//   - Masked: dpdk.service (fails on vm.max_map_count), nvmf-autoconnect.service
//     (fails: no NVMe-oF), systemd-networkd and systemd-resolved (the caller
//     configures the netns; resolv.conf is written).
//   - SYSTEMD_NSPAWN_API_VFS_WRITABLE=network: /proc/sys/net rw (the CNI bridge
//     plugin writes ip_forward inside the host's netns); the rest of /proc/sys and
//     /sys stay ro.
//   - --capability=all (containerd, runc, OVS need CAP_SYS_ADMIN, NET_ADMIN, ...),
//     --system-call-filter='add_key keyctl' (runc joins a session keyring),
//     --bind=/dev/kmsg (kubelet refuses to start without it), --resolv-conf=off and
//     --timezone=off (the host's own files stay), --register=no --keep-unit (there
//     is no systemd on the machine to register with), --console=passive.
//   - The runc wrapper (cmd/runc-lab, installed per host at RuncWrapperPath when
//     HostConfig.RuncWrapper is set) clamps a negative oomScoreAdj to 0: without
//     CAP_SYS_RESOURCE runc cannot set it and every container would fail.
func LabProfile() Profile {
	sub, _ := fs.Sub(profileFiles, "profile/root") // cannot fail: the directory is embedded
	return Profile{
		Name:   "lab",
		Files:  sub,
		Enable: map[string]string{"plinth-lab-prep.service": "sysinit.target"},
		Mask: []string{
			"dpdk.service",
			"systemd-networkd.service", "systemd-networkd.socket", "systemd-networkd-wait-online.service",
			"systemd-resolved.service",
			"nvmf-autoconnect.service", // nvme-cli (ceph-osd): no NVMe-oF here
		},
		Env: []string{"SYSTEMD_NSPAWN_API_VFS_WRITABLE=network"},
		Args: []string{
			"--capability=all", "--system-call-filter=add_key keyctl", "--bind=/dev/kmsg",
			"--resolv-conf=off", "--timezone=off", "--register=no", "--keep-unit", "--console=passive",
		},
	}
}

// Version is a short hash of what the profile puts into a rootfs: a change makes a
// new rootfs cache entry.
func (p Profile) Version() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "name=%s\n", p.Name)
	if p.Files != nil {
		err := fs.WalkDir(p.Files, ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(p.Files, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "file=%s %x\n", name, sha256.Sum256(b))
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("nspawn: profile %s: %w", p.Name, err)
		}
	}
	for _, u := range sortedKeys(p.Enable) {
		fmt.Fprintf(h, "enable=%s %s\n", u, p.Enable[u])
	}
	mask := append([]string(nil), p.Mask...)
	sort.Strings(mask)
	fmt.Fprintf(h, "mask=%s\n", strings.Join(mask, ","))
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// apply writes the profile's files, enablement links and masks into root.
func (p Profile) apply(root string) error {
	if p.Files != nil {
		err := fs.WalkDir(p.Files, ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil || name == "." {
				return err
			}
			dst := filepath.Join(root, filepath.FromSlash(name))
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			b, err := fs.ReadFile(p.Files, name)
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if dir := path.Dir(name); dir == "usr/local/sbin" || dir == "usr/local/bin" {
				mode = 0o755
			}
			if err := os.WriteFile(dst, b, mode); err != nil {
				return err
			}
			return os.Chmod(dst, mode)
		})
		if err != nil {
			return fmt.Errorf("nspawn: profile %s: files: %w", p.Name, err)
		}
	}
	unitDir := filepath.Join(root, "etc/systemd/system")
	for _, u := range sortedKeys(p.Enable) {
		wants := filepath.Join(unitDir, p.Enable[u]+".wants")
		if err := os.MkdirAll(wants, 0o755); err != nil {
			return fmt.Errorf("nspawn: profile %s: enable %s: %w", p.Name, u, err)
		}
		if err := relink("/etc/systemd/system/"+u, filepath.Join(wants, u)); err != nil {
			return fmt.Errorf("nspawn: profile %s: enable %s: %w", p.Name, u, err)
		}
	}
	for _, u := range p.Mask {
		if err := relink("/dev/null", filepath.Join(unitDir, u)); err != nil {
			return fmt.Errorf("nspawn: profile %s: mask %s: %w", p.Name, u, err)
		}
	}
	return nil
}

// relink makes link a symlink to target, replacing whatever was there.
func relink(target, link string) error {
	if err := os.RemoveAll(link); err != nil {
		return err
	}
	return os.Symlink(target, link)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
