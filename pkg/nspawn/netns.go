package nspawn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// NetNS is a host's network namespace on a lab bridge: the caller's (pkg/lab's)
// part of a host, provided here for tests and small labs.
type NetNS struct {
	Name     string // ip netns name; the path is /run/netns/<Name>
	Bridge   string // lab bridge in the machine's namespace
	HostLink string // the machine's end of the veth (≤15 chars); eth0 inside
	Addr     string // CIDR of eth0, e.g. 10.251.0.11/24
	Gateway  string // default route inside, optional
}

// Path is the namespace's file, for HostConfig.NetNS.
func (n NetNS) Path() string { return "/run/netns/" + n.Name }

// CreateBridge adds bridge name with address cidr, up. An existing one is kept.
func CreateBridge(ctx context.Context, name, cidr string) error {
	if linkExists(ctx, name) {
		return nil
	}
	return ipSeq(ctx, "bridge "+name,
		[]string{"link", "add", name, "type", "bridge"},
		[]string{"addr", "add", cidr, "dev", name},
		[]string{"link", "set", name, "up"})
}

// DeleteLink removes a link of the machine's namespace if it exists.
func DeleteLink(ctx context.Context, name string) error {
	if !linkExists(ctx, name) {
		return nil
	}
	err := ipSeq(ctx, "delete link "+name, []string{"link", "del", name})
	if err != nil && !linkExists(ctx, name) {
		return nil // a veth whose peer's namespace was just deleted goes by itself
	}
	return err
}

// CreateNetNS makes the namespace with eth0 on the bridge. An existing namespace
// is kept as it is.
func CreateNetNS(ctx context.Context, n NetNS) error {
	if _, err := os.Stat(n.Path()); err == nil {
		return nil
	}
	if len(n.HostLink) > 15 {
		return fmt.Errorf("nspawn: netns %s: link name %q longer than 15 characters", n.Name, n.HostLink)
	}
	steps := [][]string{
		{"netns", "add", n.Name},
		{"-n", n.Name, "link", "set", "lo", "up"},
		{"link", "add", n.HostLink, "type", "veth", "peer", "name", "eth0", "netns", n.Name},
		{"link", "set", n.HostLink, "master", n.Bridge, "up"},
		{"-n", n.Name, "addr", "add", n.Addr, "dev", "eth0"},
		{"-n", n.Name, "link", "set", "eth0", "up"},
	}
	if n.Gateway != "" {
		steps = append(steps, []string{"-n", n.Name, "route", "add", "default", "via", n.Gateway})
	}
	if err := ipSeq(ctx, "netns "+n.Name, steps...); err != nil {
		_ = DeleteNetNS(ctx, n)
		return err
	}
	return nil
}

// DeleteNetNS removes the namespace (its veth pair goes with it) and the
// machine's end of the veth if it is still there.
func DeleteNetNS(ctx context.Context, n NetNS) error {
	if _, err := os.Stat(n.Path()); err == nil {
		if err := ipSeq(ctx, "delete netns "+n.Name, []string{"netns", "del", n.Name}); err != nil {
			return err
		}
	}
	return DeleteLink(ctx, n.HostLink)
}

func linkExists(ctx context.Context, name string) bool {
	return exec.CommandContext(ctx, "ip", "link", "show", "dev", name).Run() == nil
}

func ipSeq(ctx context.Context, what string, steps ...[]string) error {
	for _, args := range steps {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("nspawn: %s: ip %s: %w: %s", what, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
