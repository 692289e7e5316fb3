package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/plan"
)

// labNetworkParts adds to the lab manifest two pooled networks, and on every host a
// bridge over data1 and a macvlan on data0 that take their addresses from the pools,
// plus net.* sysctls; compute-0 also gets a policy rule with its own table.
func labNetworkParts(base string, extraRoute string) string {
	m := strings.Replace(base, "  networks:\n", `  networks:
  - {name: cluster-host, role: cluster-host, cidr: 172.20.0.0/24, pool: {start: 172.20.0.100, end: 172.20.0.199}}
  - {name: storage, role: other, cidr: 172.21.0.0/24, pool: {start: 172.21.0.10, end: 172.21.0.99}}
`, 1)
	m = strings.ReplaceAll(m, "  interfaces:\n", `  sysctls: {net.ipv4.ip_forward: "1", net.ipv4.conf.all.rp_filter: "2"}
  interfaces:
  - {name: data1}
  - {name: br-ch, type: bridge, members: [data1], networks: [cluster-host], allocate: true}
  - {name: stor0, type: macvlan, parent: data0, networks: [storage], allocate: true}
`)
	i := strings.Index(m, "metadata: {name: compute-0}")
	j := i + strings.Index(m[i:], "  routes:\n") + len("  routes:\n")
	k := j - len("  routes:\n")
	return m[:k] + "  rules:\n  - {priority: 1000, from: 172.20.0.0/24, table: 214}\n" + m[k:j] +
		"  - {to: default, via: 172.20.0.1, table: 214}\n" + extraRoute + m[j:]
}

type ipLink struct {
	Name     string `json:"ifname"`
	Master   string `json:"master"`
	LinkInfo struct {
		Kind string `json:"info_kind"`
	} `json:"linkinfo"`
	AddrInfo []struct {
		Local  string `json:"local"`
		Family string `json:"family"`
	} `json:"addr_info"`
}

func (e *labEnv) links(h *lab.Host) map[string]ipLink {
	e.t.Helper()
	out, err := exec.CommandContext(e.ctx, "ip", "-n", h.NS, "-j", "-d", "addr", "show").Output()
	if err != nil {
		e.t.Fatal(err)
	}
	var ls []ipLink
	if err := json.Unmarshal(out, &ls); err != nil {
		e.t.Fatal(err)
	}
	m := map[string]ipLink{}
	for _, l := range ls {
		m[l.Name] = l
	}
	return m
}

func (l ipLink) inet() string {
	for _, a := range l.AddrInfo {
		if a.Family == "inet" {
			return a.Local
		}
	}
	return ""
}

func (e *labEnv) record(id string) plan.Record {
	e.t.Helper()
	var steps []plan.Record
	if _, err := e.cl.Do(e.ctx, "GET", "/v1/steps", nil, &steps); err != nil {
		e.t.Fatal(err)
	}
	for _, s := range steps {
		if s.ID == id {
			return s
		}
	}
	return plan.Record{}
}

// testLabNetwork applies the network parts, checks them on every host, then makes
// compute-0 route its coordinators into data0 (the rollback guard must undo it),
// and finally drops the parts again (Plinth deletes what it created).
func testLabNetwork(t *testing.T, e *labEnv) {
	base := labManifest(e.n, 8000, map[string]int{"compute-0": 41})
	e.apply(labNetworkParts(base, ""))
	e.waitReady(90 * time.Second)
	seen := map[string]string{}
	for _, h := range e.l.Hosts() {
		ls := e.links(h)
		br, mv := ls["br-ch"], ls["stor0"]
		if br.LinkInfo.Kind != "bridge" || ls["data1"].Master != "br-ch" || !strings.HasPrefix(br.inet(), "172.20.0.1") {
			t.Errorf("%s br-ch %+v data1 %+v", h.Name, br, ls["data1"])
		}
		if mv.LinkInfo.Kind != "macvlan" || !strings.HasPrefix(mv.inet(), "172.21.0.") {
			t.Errorf("%s stor0 %+v", h.Name, mv)
		}
		for _, a := range []string{br.inet(), mv.inet()} {
			if other, dup := seen[a]; dup {
				t.Errorf("%s and %s both got %s", other, h.Name, a)
			}
			seen[a] = h.Name
		}
		if out, err := e.l.Exec(e.ctx, h, "cat", "/proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(out) != "1" {
			t.Errorf("%s ip_forward %q %v", h.Name, out, err)
		}
		if ls["eth0"].inet() != h.IP {
			t.Errorf("%s eth0 changed: %+v", h.Name, ls["eth0"])
		}
	}
	c0 := e.l.Host("compute-0")
	if out, _ := e.l.Exec(e.ctx, c0, "ip", "rule", "show", "priority", "1000"); !strings.Contains(out, "from 172.20.0.0/24 lookup 214") {
		t.Errorf("compute-0 rule: %q", out)
	}

	t.Run("a change that cuts the host off is rolled back", func(t *testing.T) {
		hijack := fmt.Sprintf("10.%d.0.0/25", e.n) // the coordinators, but not the gateway side
		e.apply(labNetworkParts(base, fmt.Sprintf("  - {to: %s, dev: data0}\n", hijack)))
		start := time.Now()
		poll.Until(t, 90*time.Second, "compute-0/host.network rolled back", func() error {
			r := e.record("compute-0/host.network")
			if r.State != plan.Blocked || r.LastResult == nil || !strings.Contains(r.LastResult.Error, "rolled back") {
				return fmt.Errorf("state %s result %+v", r.State, r.LastResult)
			}
			return nil
		})
		r := e.record("compute-0/host.network")
		t.Logf("rolled back and reported in %s: %s", time.Since(start).Round(time.Second), r.LastResult.Error)
		if out, _ := e.l.Exec(e.ctx, c0, "ip", "route", "show", hijack); strings.TrimSpace(out) != "" {
			t.Errorf("hijacking route still there: %q", out)
		}
	})

	e.apply(base)
	e.waitReady(90 * time.Second)
	for _, h := range e.l.Hosts() {
		ls := e.links(h)
		for _, name := range []string{"br-ch", "stor0"} {
			if _, ok := ls[name]; ok {
				t.Errorf("%s: %s not deleted", h.Name, name)
			}
		}
		if ls["data1"].Master != "" || ls["data1"].inet() != "" {
			t.Errorf("%s data1 %+v", h.Name, ls["data1"])
		}
	}
	if out, _ := e.l.Exec(e.ctx, c0, "ip", "rule", "show", "priority", "1000"); strings.TrimSpace(out) != "" {
		t.Errorf("compute-0 rule left behind: %q", out)
	}
}
