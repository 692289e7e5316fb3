package kubeinstall

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// keepalivedHeader opens the config Plinth writes; a file without it is the
// operator's, which kube.vip never overwrites.
const keepalivedHeader = "# Written by Plinth (kube.vip); changes are reverted.\n"

// keepalivedStartWait bounds how long a restarted keepalived may take to be active.
const keepalivedStartWait = 15 * time.Second

var ifnameRE = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,15}$`)

// KeepalivedConfig renders keepalived.conf for one controller: a VRRP instance holding
// the VIP on ifc, unicast between the controllers (no multicast on bridges), and a
// check of the local API server: its /readyz with curl, or where the host has no curl
// (a minimal Debian) a TCP connect to its port with bash.
//
// The check only lowers the priority (weight, never a FAULT state), so the VIP stays
// up when no API answers anywhere: before kubeadm init, which reaches its own API
// through the VIP, the first controller holds it at PriorityFirst-CheckWeight against
// the second's PrioritySecond-CheckWeight. Once APIs answer, a controller whose API
// dies drops below the other and the VIP moves; it comes back (preempt) only once
// that API answers again. The check starts failed (init_fail), so a controller that
// reboots does not take the VIP back before its API is up. The values are in kubespec.
//
// There is no VRRP authentication: VRRPv2's PASS travels in clear in every advert, so
// a shared secret adds nothing against a host on the segment; adverts are unicast and
// only accepted from the declared peer (check_unicast_src).
func KeepalivedConfig(in kubespec.VIPInputs, ifc string, curl bool) ([]byte, error) {
	vip, err := netip.ParseAddr(in.VIP)
	if err != nil {
		return nil, fmt.Errorf("keepalived: vip %q: %w", in.VIP, err)
	}
	src, err := netip.ParseAddr(in.Address)
	if err != nil {
		return nil, fmt.Errorf("keepalived: address %q: %w", in.Address, err)
	}
	if src.Is4() != vip.Is4() {
		return nil, fmt.Errorf("keepalived: address %s and vip %s are of different families", src, vip)
	}
	var peers []netip.Addr
	for _, p := range in.Peers {
		a, err := netip.ParseAddr(p)
		if err != nil || a.Is4() != vip.Is4() || a == src {
			return nil, fmt.Errorf("keepalived: peer %q is not another address of the vip's family", p)
		}
		peers = append(peers, a)
	}
	switch {
	case !ifnameRE.MatchString(ifc):
		return nil, fmt.Errorf("keepalived: interface %q is not a valid interface name", ifc)
	case in.RouterID < 1 || in.RouterID > 255:
		return nil, fmt.Errorf("keepalived: routerID %d is out of range 1..255", in.RouterID)
	case in.Priority < 1 || in.Priority > 254:
		return nil, fmt.Errorf("keepalived: priority %d is out of range 1..254", in.Priority)
	case in.Port < 1 || in.Port > 65535:
		return nil, fmt.Errorf("keepalived: port %d is out of range", in.Port)
	}
	check := fmt.Sprintf("/usr/bin/curl -sfk --max-time 2 -o /dev/null https://127.0.0.1:%d/readyz", in.Port)
	if !curl {
		check = fmt.Sprintf("/bin/bash -c '</dev/tcp/127.0.0.1/%d'", in.Port)
	}
	bits, version := 32, ""
	if vip.Is6() {
		bits, version = 128, "    version 3\n"
	}
	var b bytes.Buffer
	b.WriteString(keepalivedHeader)
	fmt.Fprintf(&b, `# The control-plane VIP %s of the Plinth Kubernetes cluster (docs/kubernetes.md).
global_defs {
    script_user nobody
    enable_script_security
}

vrrp_script plinth_apiserver {
    script "%s"
    interval 2
    timeout 3
    fall 2
    rise 2
    init_fail
    weight -%d
}

vrrp_instance plinth_api {
    state BACKUP
%s    interface %s
    virtual_router_id %d
    priority %d
    advert_int 1
    unicast_src_ip %s
`, vip, check, kubespec.KeepalivedCheckWeight, version, ifc, in.RouterID, in.Priority, src)
	if len(peers) > 0 {
		b.WriteString("    check_unicast_src\n    unicast_peer {\n")
		for _, p := range peers {
			fmt.Fprintf(&b, "        %s\n", p)
		}
		b.WriteString("    }\n")
	}
	fmt.Fprintf(&b, `    virtual_ipaddress {
        %s/%d dev %s
    }
    track_script {
        plinth_apiserver
    }
}
`, vip, bits, ifc)
	return b.Bytes(), nil
}

// keepalived plans kube.vip with the keepalived provider: Plinth's keepalived.conf,
// the unit enabled and running it, and no kube-vip static pod left from the other
// provider (two holders would fight over the VIP).
func (d *VIPDriver) keepalived(ctx context.Context, in kubespec.VIPInputs) ([]driver.Change, error) {
	if in.VIP == "" || in.Port == 0 || in.Address == "" {
		return nil, driver.Permanent(fmt.Errorf("kube.vip: keepalived inputs need vip, port and address"))
	}
	curl := true
	if d.o.lookPath != nil {
		if _, err := d.o.lookPath("keepalived"); err != nil {
			return nil, driver.Permanent(fmt.Errorf("kube.vip: keepalived is not installed on this host (apt-get install keepalived; plinth-agent recommends it): %w", err))
		}
		_, err := d.o.lookPath("curl")
		curl = err == nil
	}
	ifc := in.Interface
	if ifc == "" {
		var err error
		if ifc, err = interfaceWith(in.Address); err != nil {
			return nil, fmt.Errorf("kube.vip: %w", err)
		}
	}
	conf, err := KeepalivedConfig(in, ifc, curl)
	if err != nil {
		return nil, driver.Permanent(fmt.Errorf("kube.vip: %w", err))
	}
	var cs []driver.Change
	if pod := d.o.paths.Join(vipManifest); exists(pod) {
		cs = append(cs, driver.Change{Summary: "remove kube-vip static pod " + pod + " (keepalived holds the VIP now)",
			Apply: func(context.Context) error { return removeFile(pod) }})
	}
	path := d.o.paths.Join(keepalivedConf)
	cur, err := os.ReadFile(path)
	switch {
	case err != nil && !missing(err):
		return nil, fmt.Errorf("kube.vip: read %s: %w", path, err)
	case err == nil && !bytes.HasPrefix(cur, []byte(keepalivedHeader)):
		return nil, driver.Permanent(fmt.Errorf("kube.vip: %s exists and is not Plinth's; "+
			"move it away (kube.vip owns keepalived on the controllers) and retry the step", path))
	}
	changed := !bytes.Equal(cur, conf)
	if changed {
		cs = append(cs, driver.Change{
			Summary: fmt.Sprintf("write %s (VIP %s on %s, VRRP router %d, priority %d, peers %s)",
				path, in.VIP, ifc, in.RouterID, in.Priority, orNone(in.Peers)),
			Apply: func(context.Context) error { return writeFile(path, conf, 0o644) }})
	}
	active, err := d.o.services.Running(ctx, keepalivedUnit)
	if err != nil {
		return nil, fmt.Errorf("kube.vip: %w", err)
	}
	if changed || !active {
		what := "enable and start " + keepalivedUnit
		if active {
			what = "restart " + keepalivedUnit + " to take the new config"
		}
		cs = append(cs, driver.Change{Summary: what, Apply: func(ctx context.Context) error {
			if err := d.o.services.Restart(ctx, keepalivedUnit); err != nil {
				return err
			}
			return d.waitActive(ctx, keepalivedUnit)
		}})
	}
	return cs, nil
}

// stopKeepalived is the kube-vip provider's undo of the keepalived one: without
// Plinth's config, Debian's unit (ConditionFileNotEmpty on it) stops on restart.
func (d *VIPDriver) stopKeepalived() []driver.Change {
	path := d.o.paths.Join(keepalivedConf)
	cur, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(cur, []byte(keepalivedHeader)) {
		return nil
	}
	return []driver.Change{{Summary: "remove Plinth's " + path + " and stop " + keepalivedUnit + " (kube-vip holds the VIP now)",
		Apply: func(ctx context.Context) error {
			if err := removeFile(path); err != nil {
				return err
			}
			return d.o.services.Restart(ctx, keepalivedUnit)
		}}}
}

// waitActive waits for a restarted unit to report active.
func (d *VIPDriver) waitActive(ctx context.Context, unit string) error {
	ctx, cancel := context.WithTimeout(ctx, keepalivedStartWait)
	defer cancel()
	for {
		ok, err := d.o.services.Active(ctx, unit)
		if err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is not active %s after its restart (see journalctl -u %s): %v", unit, keepalivedStartWait, unit, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// interfaceWith names the interface holding addr, for inputs that name none.
func interfaceWith(addr string) (string, error) {
	want, err := netip.ParseAddr(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", addr, err)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("list interfaces: %w", err)
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == want {
					return ifc.Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no interface holds %s yet (is host.network done?)", addr)
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !missing(err) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

func orNone(peers []string) string {
	if len(peers) == 0 {
		return "none"
	}
	return strings.Join(peers, ", ")
}
