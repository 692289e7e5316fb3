package main

import (
	"io"
	"testing"
	"time"
)

// The lines are lab.Up's progress format (pkg/lab/site.go); written in pieces, as a
// writer may receive them.
func TestUpLogPicksHostTimes(t *testing.T) {
	u := &upLog{out: io.Discard, start: time.Now()}
	text := "11:00:01  host controller-0  booted (systemd running) in 3.4s, eth0 10.50.0.11/24\n" +
		"11:00:09  host controller-0  one-node Ceph cluster (ceph-mon@, ceph-mgr@, ceph-osd@0 units) healthy in 8.2s\n" +
		"11:00:20  host controller-1  install.sh --join controller: coordinator and agent running (6.0s)\n" +
		"11:00:25  host compute-0     install.sh --agent: agent enrolled and running (2.5s)\n"
	for i := 0; i < len(text); i += 7 {
		if _, err := u.Write([]byte(text[i:min(i+7, len(text))])); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]hostTimes{
		"controller-0": {boot: 3400 * time.Millisecond, ceph: 8200 * time.Millisecond},
		"controller-1": {install: 6 * time.Second, kind: "--join controller"},
		"compute-0":    {install: 2500 * time.Millisecond, kind: "--agent"},
	}
	if len(u.hosts) != len(want) {
		t.Fatalf("hosts %d, want %d", len(u.hosts), len(want))
	}
	for _, h := range u.hosts {
		w := want[h.name]
		if h.boot != w.boot || h.ceph != w.ceph || h.install != w.install || h.kind != w.kind {
			t.Errorf("%s: boot %s ceph %s install %s %q, want %s %s %s %q", h.name, h.boot, h.ceph, h.install, h.kind, w.boot, w.ceph, w.install, w.kind)
		}
	}
}
