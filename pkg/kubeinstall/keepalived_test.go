package kubeinstall

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
)

// vipInputs renders the sample site with the given VIP provider and resolves host's
// kube.vip inputs.
func vipInputs(t *testing.T, net, host, provider string) json.RawMessage {
	t.Helper()
	st, ok := renderSite(t, siteOpts{net: net, witness: true, extra: "    vipProvider: " + provider + "\n"})[host+"/kube.vip"]
	if !ok {
		t.Fatalf("no %s/kube.vip", host)
	}
	return newSecrets().resolve(t, st)
}

func TestKeepalivedPrioritiesKeepTheBootstrapAndFailoverOrder(t *testing.T) {
	first, second, w := kubespec.KeepalivedPriorityFirst, kubespec.KeepalivedPrioritySecond, kubespec.KeepalivedCheckWeight
	switch {
	case first-w <= second-w: // no API anywhere (before kubeadm init): the first holds the VIP
		t.Error("the first controller must win while no API answers")
	case first-w >= second: // only the first's API is dead: the second takes the VIP
		t.Error("a dead API on the first controller must move the VIP")
	case second-w < 1 || first > 254:
		t.Error("priorities out of VRRP's range")
	}
}

func TestKeepalivedConfig(t *testing.T) {
	base := kubespec.VIPInputs{Provider: kubespec.VIPKeepalived, VIP: "10.0.1.10", Port: 6443, RouterID: 42,
		Priority: kubespec.KeepalivedPriorityFirst, Address: "10.0.1.11", Peers: []string{"10.0.1.12"}}
	for _, tc := range []struct {
		name   string
		mutate func(*kubespec.VIPInputs)
		ifc    string
		noCurl bool
		want   []string // lines the config holds
		absent []string
		err    string
	}{
		{name: "first controller", ifc: "eth1", want: []string{
			"    interface eth1", "    virtual_router_id 42", "    priority 150", "    advert_int 1", "    state BACKUP",
			"    unicast_src_ip 10.0.1.11", "    check_unicast_src", "        10.0.1.12", "        10.0.1.10/32 dev eth1",
			`    script "/usr/bin/curl -sfk --max-time 2 -o /dev/null https://127.0.0.1:6443/readyz"`, "    weight -60", "    init_fail",
			"    script_user nobody", "        plinth_apiserver"},
			absent: []string{"nopreempt", "authentication", "version 3"}},
		{name: "second controller, other port", mutate: func(in *kubespec.VIPInputs) {
			in.Priority, in.Address, in.Peers, in.Port = kubespec.KeepalivedPrioritySecond, "10.0.1.12", []string{"10.0.1.11"}, 16443
		}, ifc: "br-mgmt", want: []string{"    priority 100", "    unicast_src_ip 10.0.1.12", "        10.0.1.11",
			"https://127.0.0.1:16443/readyz", "        10.0.1.10/32 dev br-mgmt"}},
		{name: "no curl: a TCP check with bash", ifc: "eth1", noCurl: true,
			want: []string{`    script "/bin/bash -c '</dev/tcp/127.0.0.1/6443'"`}, absent: []string{"curl"}},
		{name: "single controller: no unicast peers", mutate: func(in *kubespec.VIPInputs) { in.Peers = nil }, ifc: "eth1",
			absent: []string{"unicast_peer", "check_unicast_src"}},
		{name: "IPv6 needs VRRPv3", mutate: func(in *kubespec.VIPInputs) {
			in.VIP, in.Address, in.Peers = "fd00::10", "fd00::11", []string{"fd00::12"}
		}, ifc: "eth1", want: []string{"    version 3", "        fd00::10/128 dev eth1", "        fd00::12"}},
		{name: "bad vip", mutate: func(in *kubespec.VIPInputs) { in.VIP = "10.0.1.300" }, ifc: "eth1", err: `vip "10.0.1.300"`},
		{name: "peer of the other family", mutate: func(in *kubespec.VIPInputs) { in.Peers = []string{"fd00::12"} }, ifc: "eth1", err: `peer "fd00::12"`},
		{name: "peer is itself", mutate: func(in *kubespec.VIPInputs) { in.Peers = []string{"10.0.1.11"} }, ifc: "eth1", err: "another address"},
		{name: "interface injects config", ifc: "eth1\n}\nvrrp_instance x {", err: "not a valid interface name"},
		{name: "router id", mutate: func(in *kubespec.VIPInputs) { in.RouterID = 256 }, ifc: "eth1", err: "routerID 256 is out of range 1..255"},
		{name: "priority", mutate: func(in *kubespec.VIPInputs) { in.Priority = 255 }, ifc: "eth1", err: "priority 255 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			if tc.mutate != nil {
				tc.mutate(&in)
			}
			b, err := KeepalivedConfig(in, tc.ifc, !tc.noCurl)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(b), "\n")
			for _, w := range tc.want {
				if !containsLine(lines, w) {
					t.Errorf("config lacks %q:\n%s", w, b)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(string(b), a) {
					t.Errorf("config has %q:\n%s", a, b)
				}
			}
			if again, _ := KeepalivedConfig(in, tc.ifc, !tc.noCurl); string(again) != string(b) {
				t.Error("rendering is not deterministic")
			}
		})
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want || (strings.HasPrefix(want, "http") && strings.Contains(l, want)) {
			return true
		}
	}
	return false
}

// fakeServices is a test double for systemd where no process is wanted: it records
// restarts and reports a restarted unit active.
type fakeServices struct {
	active   bool
	restarts int
}

func (s *fakeServices) Active(context.Context, string) (bool, error) { return s.active, nil }
func (s *fakeServices) Running(ctx context.Context, unit string) (bool, error) {
	return s.Active(ctx, unit)
}
func (s *fakeServices) Restart(context.Context, string) error {
	s.restarts++
	s.active = true
	return nil
}

func TestVIPDriverKeepalivedIsIdempotentAndReplacesKubeVIP(t *testing.T) {
	h := newFakeHost(t)
	svc := &fakeServices{}
	d := NewVIPDriver(t.TempDir(), append(h.opts, WithServices(svc))...)
	ctx := context.Background()
	raw := vipInputs(t, "10.213.7", "ctl-0", kubespec.VIPKeepalived)

	// A kube-vip pod left from the other provider goes; keepalived takes over.
	h.write(vipManifest, "kube-vip")
	res := driver.Run(ctx, d, raw)
	if !res.OK() || len(res.Changes) != 3 || svc.restarts != 1 {
		t.Fatalf("first run: %+v (restarts %d)", res, svc.restarts)
	}
	for i, want := range []string{"remove kube-vip static pod", "write " + h.p.Join(keepalivedConf) + " (VIP 10.213.7.10 on eth1, VRRP router ",
		"enable and start keepalived.service"} {
		if !strings.HasPrefix(res.Changes[i], want) {
			t.Errorf("change %d %q, want %q…", i, res.Changes[i], want)
		}
	}
	if exists(h.p.Join(vipManifest)) {
		t.Error("the kube-vip manifest is still there")
	}
	conf, _ := os.ReadFile(h.p.Join(keepalivedConf))
	if !strings.Contains(string(conf), "priority 150") || !strings.Contains(string(conf), "unicast_src_ip 10.213.7.11") {
		t.Errorf("config:\n%s", conf)
	}

	// Unchanged: nothing to do. Stopped: started again, config untouched.
	if res := driver.Run(ctx, d, raw); !res.OK() || len(res.Changes) != 0 || svc.restarts != 1 {
		t.Fatalf("second run: %+v", res)
	}
	svc.active = false
	if res := driver.Run(ctx, d, raw); !res.OK() || len(res.Changes) != 1 || res.Changes[0] != "enable and start keepalived.service" {
		t.Fatalf("stopped: %+v", res)
	}
	// A changed config restarts keepalived.
	h.write(keepalivedConf, keepalivedHeader+"old\n")
	if res := driver.Run(ctx, d, raw); !res.OK() || len(res.Changes) != 2 || !strings.HasPrefix(res.Changes[1], "restart keepalived.service") {
		t.Fatalf("changed: %+v", res)
	}

	// The operator's own keepalived.conf is never overwritten.
	h.write(keepalivedConf, "vrrp_instance theirs {}\n")
	if _, err := d.Diff(ctx, raw); !driver.IsPermanent(err) || !strings.Contains(err.Error(), "is not Plinth's") {
		t.Fatalf("foreign config: %v", err)
	}
	h.write(keepalivedConf, string(conf))

	// Switching to kube-vip removes Plinth's keepalived config and restarts the unit,
	// which Debian's ConditionFileNotEmpty then keeps stopped.
	kv := vipInputs(t, "10.213.7", "ctl-0", kubespec.VIPKubeVIP)
	restarts := svc.restarts
	res = driver.Run(ctx, d, kv)
	if !res.OK() || len(res.Changes) != 2 || !strings.Contains(res.Changes[0], "stop keepalived.service") || svc.restarts != restarts+1 {
		t.Fatalf("to kube-vip: %+v", res)
	}
	if exists(h.p.Join(keepalivedConf)) || !exists(h.p.Join(vipManifest)) {
		t.Error("kube-vip mode keeps the manifest and no keepalived config")
	}
	if res := driver.Run(ctx, d, kv); !res.OK() || len(res.Changes) != 0 {
		t.Fatalf("kube-vip again: %+v", res)
	}
}

func TestVIPDriverRefusesUnknownProviders(t *testing.T) {
	h := newFakeHost(t)
	d := NewVIPDriver(t.TempDir(), h.opts...)
	raw, _ := json.Marshal(kubespec.VIPInputs{Provider: "ucarp", VIP: "10.0.1.10", Port: 6443})
	if _, err := d.Diff(context.Background(), raw); !driver.IsPermanent(err) || !strings.Contains(err.Error(), "valid providers are keepalived, kube-vip") {
		t.Fatalf("unknown provider: %v", err)
	}
}
