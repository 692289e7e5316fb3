package lab

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNetworkConflict(t *testing.T) {
	p := netip.MustParsePrefix
	machine := map[string][]netip.Prefix{
		"lo":         {p("127.0.0.1/8"), p("::1/128")},
		"eth0":       {p("192.168.1.5/24"), p("fe80::1/64")},
		"pe495269br": {p("10.130.0.1/24"), p("10.214.0.1/24")},
	}
	for _, tc := range []struct {
		name     string
		networks []string
		want     string // substring of the conflict; "" for none
		err      bool
	}{
		{"free", []string{"10.211.0.0/24", "10.215.0.1/24"}, "", false},
		{"the VIP network of a running lab", []string{"10.211.0.0/24", "10.214.0.1/24"}, "network 10.214.0.0/24 is already on interface pe495269br (10.214.0.1/24)", false},
		{"a management subnet", []string{"10.130.0.0/24"}, "interface pe495269br", false},
		{"a wider network covering the machine's", []string{"192.168.0.0/16"}, "interface eth0", false},
		{"a narrower one inside it", []string{"192.168.1.128/25"}, "interface eth0", false},
		{"link-local is ignored", []string{"fe80::/64"}, "", false},
		{"bad cidr", []string{"10.1.2"}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := networkConflict(tc.networks, machine)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("conflict = %q, want %q", got, tc.want)
			}
			if got != "" && !strings.Contains(got, "ip link del") {
				t.Errorf("no repair in %q", got)
			}
		})
	}
}
