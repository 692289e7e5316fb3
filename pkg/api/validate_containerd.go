package api

import (
	"maps"
	"net"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
)

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// containerd validates site.spec.kubernetes.containerd; nil means all defaults.
func (v *validator) containerd(c *ContainerdSpec) {
	if c == nil {
		return
	}
	const p = "site.spec.kubernetes.containerd"
	if c.SandboxImage != "" {
		if _, err := reference.ParseNormalizedNamed(c.SandboxImage); err != nil {
			v.add(p+".sandboxImage", "%q is not a valid image reference (want e.g. registry.k8s.io/pause:3.10.2): %v", clip(c.SandboxImage), err)
		}
	}
	v.oneOf(p+".cgroupDriver", c.CgroupDriver, true, CgroupDrivers...)
	v.oneOf(p+".snapshotter", c.Snapshotter, true, Snapshotters...)
	for _, reg := range slices.Sorted(maps.Keys(c.Mirrors)) {
		v.mirror(index(p+".mirrors", mapKey(reg)), reg, c.Mirrors[reg])
	}
	seen := map[string]bool{}
	for i, a := range c.ImageArchives {
		ap := index(p+".imageArchives", strconv.Itoa(i))
		switch {
		case a.Path == "":
			v.add(ap+".path", "required: the archive's absolute path on every host")
		case !path.IsAbs(a.Path) || path.Clean(a.Path) != a.Path:
			v.add(ap+".path", "%q must be an absolute, clean path (e.g. /var/lib/plinth/images/pause.tar)", clip(a.Path))
		case seen[a.Path]:
			v.add(ap+".path", "%q is listed twice", clip(a.Path))
		}
		seen[a.Path] = true
		if a.Digest != "" && !digestRE.MatchString(a.Digest) {
			v.add(ap+".digest", "%q is not a digest; use sha256: and 64 lowercase hex digits (sha256sum FILE)", clip(a.Digest))
		}
	}
}

func (v *validator) mirror(p, reg string, m RegistryMirror) {
	if reg != DefaultMirrorRegistry && !isRegistryHost(reg) {
		v.add(p, "%q is not a registry; use host[:port] as image names use it (docker.io, registry.k8s.io, 10.0.0.5:5000) or %s", clip(reg), DefaultMirrorRegistry)
	}
	if len(m.Endpoints) == 0 {
		v.add(p+".endpoints", "required: at least one mirror URL (e.g. https://mirror.example:5000)")
	}
	for i, e := range m.Endpoints {
		ep := index(p+".endpoints", strconv.Itoa(i))
		u, err := url.Parse(e)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.add(ep, "%q is not an http(s) URL (want e.g. https://mirror.example:5000)", clip(e))
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			v.add(ep, "%q must not carry credentials, a query or a fragment", clip(e))
		case slices.Index(m.Endpoints, e) < i:
			v.add(ep, "%q is listed twice", clip(e))
		}
	}
}

// isRegistryHost reports whether s is a registry host as image names carry it: a DNS
// name or IP, optionally with a port. It becomes a directory name under certs.d.
func isRegistryHost(s string) bool {
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return port != "" || !strings.Contains(host, ":") // a bare IPv6 needs [..]:port
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, l := range strings.Split(host, ".") {
		if !isDNSLabel(l) {
			return false
		}
	}
	return true
}
