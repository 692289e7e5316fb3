package host

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

var nsSeq atomic.Int32

// testNS is a named network namespace (/run/netns/<name>) removed at cleanup.
type testNS struct {
	name string
	h    netns.NsHandle
}

// newNS creates a fresh namespace, or skips the test when that is not possible here.
func newNS(t testing.TB) *testNS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	name := fmt.Sprintf("plinth-test-%d-%d", os.Getpid(), nsSeq.Add(1))
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Skipf("network namespaces unavailable: %v", err)
	}
	h, err := netns.NewNamed(name) // moves this thread into the new namespace
	if serr := netns.Set(orig); serr != nil {
		orig.Close()
		// Still locked: the thread is discarded when this goroutine ends.
		t.Fatalf("switch back to the original namespace: %v", serr)
	}
	orig.Close()
	runtime.UnlockOSThread()
	if err != nil {
		t.Skipf("cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		h.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return &testNS{name: name, h: h}
}

// run calls fn on the calling goroutine with its thread locked and switched into the
// namespace, so everything fn does synchronously (the driver included) happens there.
// fn may call t.Fatal: the deferred switch back still runs.
func (n *testNS) run(t testing.TB, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("get current namespace: %v", err)
	}
	if err := netns.Set(n.h); err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatalf("enter namespace %s: %v", n.name, err)
	}
	defer func() {
		err := netns.Set(orig)
		orig.Close()
		if err != nil {
			// Stay locked so the thread, stuck in the test namespace, is discarded.
			t.Errorf("leave namespace %s: %v", n.name, err)
			return
		}
		runtime.UnlockOSThread()
	}()
	fn()
}

// addVeth creates a veth pair in the current namespace; mac may be "".
func addVeth(t testing.TB, name, peer, mac string) {
	t.Helper()
	attrs := netlink.LinkAttrs{Name: name}
	if mac != "" {
		hw, err := net.ParseMAC(mac)
		if err != nil {
			t.Fatal(err)
		}
		attrs.HardwareAddr = hw
	}
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: peer}); err != nil {
		t.Fatalf("add veth %s/%s: %v", name, peer, err)
	}
}

func link(t testing.TB, name string) netlink.Link {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return l
}

// addrs lists the CIDRs on a link (all families).
func addrs(t testing.TB, name string) map[string]bool {
	t.Helper()
	as, err := netlink.AddrList(link(t, name), netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, a := range as {
		p, _ := toPrefix(a.IPNet)
		out[p.String()] = true
	}
	return out
}

// hasRoute reports whether a route with this key exists.
func hasRoute(t testing.TB, dst string, table, metric int) (netlink.Route, bool) {
	t.Helper()
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	return findRoute(rs, routeKey{Dst: dst, Table: table, Metric: metric})
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
