// Command flanneld is the site bundle's pod network agent (registry.local/flannel),
// run on every node by the flannel DaemonSet Plinth's kube.cni step applies. It wires
// two of flannel's packages by hand: the Kubernetes subnet manager (this node's pod
// subnet is its Node's spec.podCIDR, which kube-controller-manager allocates from
// kubeadm's podSubnet; every other node's subnet and VTEP come from their Node
// objects) and the VXLAN backend (flannel.<VNI>, with a route, ARP and FDB entry per
// remote node). Flannel's own main is not used because it links every backend, and
// one cloud backend's dependency is not served by the module proxy.
//
// Once the backend is up it writes, as upstream flanneld does, the subnet file
// (/run/flannel/subnet.env), and this node's CNI config: the bridge and host-local
// plugins on the node's subnet, with the VXLAN MTU. That config is what the flannel
// CNI plugin would hand to bridge at every pod start; writing it directly means no
// flannel CNI plugin (not served by the module proxy) is needed on the nodes.
//
// Pod traffic that leaves the pod network is not masqueraded (flanneld's --ip-masq is
// not wired): nodes route the pod network through flannel.<VNI>, so node and Service
// traffic returns without it.
//
// It runs until SIGTERM or SIGINT, then stops the backend and exits 0; the VXLAN
// device and routes stay, as with upstream flanneld, so pods keep their network
// while it restarts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/flannel-io/flannel/pkg/ipmatch"
	"github.com/flannel-io/flannel/pkg/subnet/kube"

	"github.com/flannel-io/flannel/pkg/backend/vxlan"
)

// annotationPrefix is flannel's own, so nodes carry the annotations upstream tools read.
const annotationPrefix = "flannel.alpha.coreos.com"

type options struct {
	netConf    string // net-conf.json, from the DaemonSet's ConfigMap
	subnetFile string
	cniConf    string // "" writes no CNI config
	iface      string // IP or name of the interface VXLAN runs over; "" = the default route's
	kubeconfig string // "" = in-cluster
}

func main() {
	var o options
	flag.StringVar(&o.netConf, "net-conf", "/etc/kube-flannel/net-conf.json", "flannel network config (Network, Backend)")
	flag.StringVar(&o.subnetFile, "subnet-file", "/run/flannel/subnet.env", "where to write this node's subnet and MTU")
	flag.StringVar(&o.cniConf, "cni-conf", "/etc/cni/net.d/10-flannel.conflist", "where to write this node's CNI config (empty: none)")
	flag.StringVar(&o.iface, "iface", "", "IP address or name of the interface for VXLAN traffic (default: the default route's)")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: the pod's service account)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: NODE_NAME=<node> flanneld [flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		slog.Error("flanneld", "err", err)
		os.Exit(1)
	}
	slog.Info("flanneld: stopped")
}

func run(ctx context.Context, o options) error {
	node := os.Getenv("NODE_NAME")
	if node == "" {
		return errors.New("NODE_NAME is not set (the DaemonSet sets it from spec.nodeName)")
	}
	sm, err := kube.NewSubnetManager(ctx, "", o.kubeconfig, annotationPrefix, o.netConf, true)
	if err != nil {
		return fmt.Errorf("subnet manager for node %s: %w", node, err)
	}
	cfg, err := sm.GetNetworkConfig(ctx)
	if err != nil {
		return fmt.Errorf("network config %s: %w", o.netConf, err)
	}
	if !cfg.EnableIPv4 || cfg.EnableIPv6 || cfg.BackendType != "vxlan" {
		return fmt.Errorf("%s: this flanneld runs IPv4 over the vxlan backend only, got backend %q ipv4=%t ipv6=%t",
			o.netConf, cfg.BackendType, cfg.EnableIPv4, cfg.EnableIPv6)
	}
	stack, err := ipmatch.GetIPFamily(true, false)
	if err != nil {
		return err
	}
	ext, err := ipmatch.LookupExtIface(o.iface, "", "", stack, ipmatch.PublicIPOpts{})
	if err != nil {
		return fmt.Errorf("interface for VXLAN traffic (-iface %q): %w", o.iface, err)
	}
	be, err := vxlan.New(sm, ext)
	if err != nil {
		return err
	}

	// wg owns the backend's goroutines (RegisterNetwork and Run add to it); every one
	// ends with ctx, which an error return cancels too.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	bn, err := be.RegisterNetwork(ctx, &wg, cfg)
	if err != nil {
		return fmt.Errorf("vxlan on %s: %w", ext.Iface.Name, err)
	}
	l := bn.Lease()
	if err := sm.HandleSubnetFile(o.subnetFile, cfg, false, l.Subnet, l.IPv6Subnet, bn.MTU()); err != nil {
		return fmt.Errorf("write %s: %w", o.subnetFile, err)
	}
	if o.cniConf != "" {
		if err := writeIfChanged(o.cniConf, cniConfig(l.Subnet.ToIPNet(), bn.MTU())); err != nil {
			return err
		}
	}
	slog.Info("flanneld: ready", "node", node, "subnet", l.Subnet.String(), "network", cfg.Network.String(),
		"iface", ext.Iface.Name, "vtep", ext.ExtAddr.String(), "mtu", bn.MTU())
	wg.Add(1)
	go func() {
		defer wg.Done()
		bn.Run(ctx)
	}()
	// Marks the Node's NetworkUnavailable condition false; a failure is not fatal
	// (the node still routes), as upstream.
	if err := sm.CompleteLease(ctx, l, &wg); err != nil && ctx.Err() == nil {
		slog.Warn("flanneld: set node condition", "node", node, "err", err)
	}
	<-ctx.Done()
	return nil
}

// cniConfig is the node's CNI config list: a bridge (cni0) with host-local addresses
// from the node's subnet and a default route through the bridge, then portmap for
// hostPorts. ipMasq stays off: the pod network is routed, not NATed, between nodes.
func cniConfig(sn *net.IPNet, mtu int) []byte {
	return fmt.Appendf(nil, `{
  "cniVersion": "1.0.0",
  "name": "cbr0",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "mtu": %d,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, mtu, sn.String())
}

// writeIfChanged replaces path atomically, and only when its content differs, so a
// restart does not make the runtime reload an unchanged config.
func writeIfChanged(path string, data []byte) error {
	if cur, err := os.ReadFile(path); err == nil && string(cur) == string(data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
