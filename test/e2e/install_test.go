package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/state"
)

// The install path on the lab's booted hosts: the site install script, the packages'
// units and maintainer scripts, as an operator meets them on real machines.

// testUnitsActive: every host runs systemd cleanly, with Plinth's units active.
func testUnitsActive(t *testing.T, e *labEnv) {
	for _, hs := range lab.DefaultSpec("").Hosts {
		h := e.l.Host(hs.Name)
		if out, _ := e.l.Systemctl(e.ctx, h, "is-system-running"); strings.TrimSpace(out) != "running" {
			failed, _ := e.l.Systemctl(e.ctx, h, "--failed", "--no-legend")
			t.Errorf("%s: systemd is %q; failed units:\n%s", h.Name, strings.TrimSpace(out), failed)
		}
		units := []string{"plinth-agent", "openvswitch-switch"}
		if hs.Coordinator != "" {
			units = append(units, "plinth-coordinator")
		}
		if hs.Name == lab.CephHost {
			units = append(units, "ceph-mon@"+hs.Name, "ceph-mgr@"+hs.Name, "ceph-osd@0")
		}
		for _, u := range units {
			if out, _ := e.l.Systemctl(e.ctx, h, "is-active", u); strings.TrimSpace(out) != "active" {
				t.Errorf("%s: %s is %q", h.Name, u, strings.TrimSpace(out))
			}
		}
	}
}

// testInstallRerun: the install script run again with the same arguments changes
// nothing and says so.
func testInstallRerun(t *testing.T, e *labEnv) {
	for _, tc := range []struct {
		host string
		args []string
	}{
		{"controller-0", []string{"--init", "--site", "lab", "--bind", e.l.Host("controller-0").IP, "--profile", "fast"}},
		{"compute-0", []string{"--agent", "--coordinator", e.l.Host("controller-0").IP, "--token", "unused-when-enrolled"}},
	} {
		h := e.l.Host(tc.host)
		args := append([]string{"--bundle", lab.BundleMount, "--name", h.Name, "--agent-config", lab.ShareMount + "/agent.yaml"}, tc.args...)
		out, err := e.l.Install(e.ctx, h, args...)
		if err != nil || !strings.Contains(out, "nothing to do") {
			t.Errorf("%s: re-run: %v\n%s", h.Name, err, out)
		}
	}
	e.waitReady(30 * time.Second)
}

// testAgentRestartMidStep: `systemctl restart plinth-agent` right as a step starts:
// the step finishes once the agent is back, and its success is counted once.
func testAgentRestartMidStep(t *testing.T, e *labEnv) {
	h := e.l.Host("compute-0")
	since := e.lastEvent()
	e.apply(labManifest(e.n, 9000, map[string]int{"compute-0": 51}))
	if _, err := e.l.Systemctl(e.ctx, h, "restart", "plinth-agent"); err != nil {
		t.Fatal(err)
	}
	e.waitReady(60 * time.Second)
	if _, addrs := e.link("compute-0"); strings.Join(addrs, ",") != fmt.Sprintf("10.%d.0.51/24", e.n+1) {
		t.Errorf("compute-0 has %v after the restart", addrs)
	}
	n := 0
	for _, ev := range e.events() {
		if ev.ID > since && ev.Object == "step/compute-0/host.network" && ev.Reason == "StepSucceeded" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("compute-0/host.network succeeded %d times after one change", n)
	}
}

// spareHost boots one more host on the lab bridge, not declared in the site: a fresh
// machine for the install script's bad-input, upgrade and purge cases.
func spareHost(t *testing.T, e *labEnv) *lab.Host {
	t.Helper()
	if h := e.l.Host("spare-0"); h != nil {
		return h
	}
	h, err := e.l.AddHost(e.ctx, "spare-0", fmt.Sprintf("10.%d.0.31/24", e.n), nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// nothingInstalled checks a failed install left no package, bundle, state or unit.
func nothingInstalled(t *testing.T, e *labEnv, h *lab.Host, what string) {
	t.Helper()
	out, _ := e.l.Exec(e.ctx, h, "sh", "-c", `for p in plinth-agent plinth-coordinator; do dpkg-query -W -f='${Status}\n' $p 2>/dev/null | grep -q '^install ok installed' && echo "package $p"; done
for f in /opt/plinth/bundle /var/lib/plinth /var/lib/plinth-coordinator /etc/plinth/agent.yaml /usr/lib/systemd/system/plinth-agent.service; do [ -e $f ] && echo "file $f"; done
pgrep -a plinth- || true`)
	if strings.TrimSpace(out) != "" {
		t.Errorf("%s: left behind:\n%s", what, out)
	}
}

// testInstallBadInput: each way an operator can get the install wrong gives one
// clear error and installs nothing.
func testInstallBadInput(t *testing.T, e *labEnv) {
	h := spareHost(t, e)
	c0 := e.l.Host("controller-0").IP
	base := []string{"--bundle", lab.BundleMount, "--name", h.Name, "--agent"}
	tok := func(ttl string) string {
		out, err := e.l.CLI(e.ctx, "node", "enroll", h.Name, "--role", "worker", "--ttl", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	used := tok("10m")
	// Spend it on the enrolment port, as a host would.
	if _, err := enrolAs(e.ctx, &lab.Coordinator{IP: c0, Port: lab.CoordinatorPort}, h.Name, used); err != nil {
		t.Fatalf("spending a token: %v", err)
	}
	expired := tok("1s")
	time.Sleep(2 * time.Second)
	// A corrupted copy of the bundle, and something squatting on the agent's port.
	if _, err := e.l.Exec(e.ctx, h, "sh", "-c", "cp -a "+lab.BundleMount+" /root/bad-bundle && printf X | dd of=/root/bad-bundle/bin/kubectl bs=1 seek=1000 conv=notrunc status=none"); err != nil {
		t.Fatal(err)
	}
	script := lab.BundleMount + "/install.sh"
	for _, tc := range []struct {
		name string
		argv []string
		want string
	}{
		{"not root", append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", script}, append(base, "--coordinator", c0, "--token", "x")...), "must run as root"},
		{"not Debian", []string{"unshare", "-m", "sh", "-c", `printf 'ID=fedora\nPRETTY_NAME="Fedora 40"\n' >/tmp/osr && mount --bind /tmp/osr /etc/os-release && exec bash "$0" "$@"`, script, "--bundle", lab.BundleMount, "--agent", "--coordinator", c0, "--token", "x"}, "not a Debian host"},
		{"no systemd", []string{"unshare", "-m", "sh", "-c", `mount -t tmpfs none /run/systemd && exec bash "$0" "$@"`, script, "--bundle", lab.BundleMount, "--agent", "--coordinator", c0, "--token", "x"}, "systemd is not running"},
		{"bundle missing", []string{"bash", script, "--bundle", "/root/nope.tar", "--agent", "--coordinator", c0, "--token", "x"}, "bundle /root/nope.tar not found"},
		{"checksum mismatch", []string{"bash", script, "--bundle", "/root/bad-bundle", "--agent", "--coordinator", c0, "--token", "x"}, "bin/kubectl: FAILED"},
		{"token wrong", append(append([]string{"bash", script}, base...), "--coordinator", c0, "--token", "plinth1.bogus"), "refused to enrol agent spare-0"},
		{"token used", append(append([]string{"bash", script}, base...), "--coordinator", c0, "--token", used), "refused to enrol agent spare-0"},
		{"token expired", append(append([]string{"bash", script}, base...), "--coordinator", c0, "--token", expired), "refused to enrol agent spare-0"},
		{"coordinator unreachable", append(append([]string{"bash", script}, base...), "--coordinator", fmt.Sprintf("10.%d.0.99", e.n), "--token", "x"), fmt.Sprintf("cannot reach any coordinator at 10.%d.0.99:7441", e.n)},
		{"port in use", []string{"sh", "-c", `systemd-run --quiet --unit=squat socat TCP-LISTEN:7444,reuseaddr,fork EXEC:/bin/true && sleep 0.5 && bash "$0" "$@"; rc=$?; systemctl stop squat; exit $rc`, script, "--bundle", lab.BundleMount, "--name", h.Name, "--agent", "--coordinator", c0, "--token", "x"}, "port 7444 is already in use"},
	} {
		out, err := h.Machine.Exec(e.ctx, nil, tc.argv...)
		msg := string(out)
		if err != nil {
			msg += err.Error()
		}
		if err == nil || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: want an error with %q, got %v:\n%s", tc.name, tc.want, err, msg)
		} else {
			t.Logf("%s: %s", tc.name, lastErrorLine(msg))
		}
		nothingInstalled(t, e, h, tc.name)
	}
	// The coordinator's own word on a bad token reaches the operator.
	out, err := h.Machine.Exec(e.ctx, nil, append(append([]string{"bash", script}, base...), "--coordinator", c0, "--token", expired)...)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "expired") {
		t.Errorf("expired token: the coordinator's reason is not shown: %v\n%s", err, out)
	}
	nothingInstalled(t, e, h, "token expired, again")
}

func lastErrorLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "error:") {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(s)
}

// testUpgradeAndPurge installs the agent on the spare host, upgrades its package to
// a newer build (identity and state kept, the service restarted on the new binary),
// then purges it (no unit, file or process left).
func testUpgradeAndPurge(t *testing.T, e *labEnv) {
	h := spareHost(t, e)
	c0 := e.l.Host("controller-0").IP
	tok, err := e.l.CLI(e.ctx, "node", "enroll", h.Name, "--role", "worker", "--ttl", "10m")
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.l.Install(e.ctx, h, "--bundle", lab.BundleMount, "--name", h.Name, "--agent", "--coordinator", c0, "--token", strings.TrimSpace(tok))
	if err != nil {
		t.Fatalf("install on %s: %v\n%s", h.Name, err, out)
	}
	reachable := func() error {
		if r := e.host(h.Name).Reachable; r != api.ConditionTrue {
			return fmt.Errorf("Reachable=%q", r)
		}
		return nil
	}
	poll.Until(t, 30*time.Second, "spare-0 Reachable", reachable)
	sh := func(script string) string {
		t.Helper()
		out, err := e.l.Exec(e.ctx, h, "sh", "-ec", script)
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return strings.TrimSpace(out)
	}
	identity := sh("sha256sum /var/lib/plinth/agent.json /var/lib/plinth/pki/* | sha256sum")
	pid := sh("systemctl show -p MainPID --value plinth-agent")
	// A newer build of the same package: its version sorts above the installed one.
	sh(`v=$(dpkg-query -W -f='${Version}' plinth-agent); d=$(mktemp -d); dpkg-deb -R /opt/plinth/bundle/current/debs/plinth-agent_*.deb $d/p
sed -i "s/^Version: .*/Version: ${v}+up1/" $d/p/DEBIAN/control; dpkg-deb -b $d/p /root/plinth-agent-up1.deb >/dev/null`)
	began := time.Now()
	sh("dpkg -i /root/plinth-agent-up1.deb >/root/upgrade.log 2>&1 || { cat /root/upgrade.log; exit 1; }")
	t.Logf("agent package upgraded in %s", time.Since(began).Round(100*time.Millisecond))
	if got := sh("sha256sum /var/lib/plinth/agent.json /var/lib/plinth/pki/* | sha256sum"); got != identity {
		t.Error("the upgrade changed the agent's identity")
	}
	if now := sh("systemctl show -p MainPID --value plinth-agent"); now == pid || now == "0" {
		t.Errorf("the upgrade did not restart the running agent (pid %s, now %s)", pid, now)
	}
	if out := sh("systemctl is-active plinth-agent"); out != "active" {
		t.Errorf("agent after upgrade: %s", out)
	}
	poll.Until(t, 30*time.Second, "spare-0 Reachable after the upgrade", reachable)

	sh("dpkg --purge plinth-agent >/root/purge.log 2>&1 || { cat /root/purge.log; exit 1; }")
	left := sh(`for f in /var/lib/plinth /etc/plinth/agent.yaml /usr/lib/systemd/system/plinth-agent.service /etc/systemd/system/multi-user.target.wants/plinth-agent.service /usr/bin/plinth-agent; do [ ! -e $f ] || echo $f; done
pgrep -a plinth-agent || true; systemctl list-units --all --no-legend 'plinth-agent*' || true`)
	if left != "" {
		t.Errorf("purge left behind:\n%s", left)
	}
}

func (e *labEnv) events() []state.Event {
	e.t.Helper()
	var evs []state.Event
	if _, err := e.cl.Do(e.ctx, "GET", "/v1/events", nil, &evs); err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func (e *labEnv) lastEvent() uint64 {
	var last uint64
	for _, ev := range e.events() {
		last = max(last, ev.ID)
	}
	return last
}
