// Package nspawn boots lab hosts: Debian bookworm root filesystems booted with
// `systemd-nspawn --boot`, each with systemd as PID 1, its own network namespace
// (made by the caller, given by path) and its own cgroup subtree. It is the lab's
// stand-in for a freshly installed Debian machine, so the site install path runs
// on the lab exactly as on a real site.
//
// It owns four things: the cached root filesystem (BuildRootfs), the lab profile
// (what this machine forces on a booted host: Profile, LabProfile), hosts (Boot,
// Load, Start, Exec, Poweroff, PowerLoss, Remove) and their persisted records,
// so a later process can remove hosts it did not boot.
//
// It must never change anything on the machine outside the machine dirs, the
// cache dir and the cgroup subtrees it creates: the profile's sysctl values are
// shown to a host through bind-mounted files, never written to the machine.
// Network namespaces and links are the caller's (helpers in netns.go).
//
// A host's machine dir holds host.json (the record Load reads), upper/ and work/
// (the overlayfs over the read-only cached rootfs: the host's disk, kept across
// Poweroff and Start), root/ (where the overlay is mounted while the host runs),
// dirs/ (plain directories bind-mounted at DefaultPlainDirs, e.g.
// /var/lib/containerd, whose overlayfs snapshotter cannot work on an overlayfs)
// and console.log. Its cgroups are <hierarchy>/<our own cgroup>/<group>/<name>
// in every hierarchy; systemd-nspawn joins them before it starts, so the host's
// cgroup namespace root is its own subtree and a power loss can find every
// process of it.
package nspawn
