// Package labceph makes the lab's one-node Ceph cluster inside a booted lab host
// (pkg/nspawn) with the Debian packages' own systemd units: ceph-mon@<id>,
// ceph-mgr@<id> and ceph-osd@0 with a memstore OSD. It leaves the cluster where
// Plinth's agent looks by default: /etc/ceph/ceph.conf (pkg/ceph's
// SystemConfigFile) and the admin keyring /etc/ceph/ceph.client.admin.keyring.
//
// It stands in for what a real site has before Plinth arrives (Plinth never
// deploys Ceph daemons), so it must never be used on a real host. It reaches the
// host only through an Exec function, so it depends on no lab type.
package labceph

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strings"
	"time"
)

// bootstrapScript runs inside the host as root: bash -s -- IP ID.
//
//go:embed bootstrap.sh
var bootstrapScript string

// Exec runs argv inside a host with stdin and returns its standard output, as
// (*nspawn.Host).Exec does.
type Exec func(ctx context.Context, stdin io.Reader, argv ...string) ([]byte, error)

// Result is what a Bootstrap did.
type Result struct {
	// Changed lists what was made or started, one line each; empty when the host
	// already had a healthy cluster.
	Changed []string
	Status  Status
}

var idRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Bootstrap makes the host's one-node cluster, monitor and manager named id and
// every daemon on the management address ip, and waits until it is healthy
// (Status.Healthy). It is idempotent: on a host that has the cluster it changes
// nothing and reports no change. Its wait ends with ctx; give it a deadline
// (a cold bootstrap takes a few seconds).
func Bootstrap(ctx context.Context, exec Exec, ip, id string) (Result, error) {
	if a := net.ParseIP(ip); a == nil || a.To4() == nil {
		return Result{}, fmt.Errorf("labceph: management address %q: want an IPv4 address, e.g. 10.251.0.11", ip)
	}
	if !idRE.MatchString(id) {
		return Result{}, fmt.Errorf("labceph: daemon id %q: want lower case letters, digits and dashes (the host's name)", id)
	}
	out, err := exec(ctx, strings.NewReader(bootstrapScript), "bash", "-s", "--", ip, id)
	if err != nil {
		return Result{}, fmt.Errorf("labceph: bootstrap on %s: %w (output: %s)", ip, err, strings.TrimSpace(string(out)))
	}
	var res Result
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if c, ok := strings.CutPrefix(sc.Text(), "changed: "); ok {
			res.Changed = append(res.Changed, c)
		}
	}
	res.Status, err = WaitHealthy(ctx, exec)
	return res, err
}

// Status is the part of `ceph status` a lab cares about.
type Status struct {
	Health string // HEALTH_OK, HEALTH_WARN or HEALTH_ERR
	// Checks are the health checks raised, e.g. "PG_AVAILABILITY: Reduced data availability: 1 pg inactive".
	Checks       []string
	OSDsUp       int
	OSDsIn       int
	MgrAvailable bool
	// PGs is the number of placement groups, PGsActiveClean those active+clean.
	PGs, PGsActiveClean int
}

// Healthy is what a one-node lab cluster is once ready: HEALTH_OK with its OSD
// up and in, a manager available and every placement group active+clean.
// HEALTH_WARN is not accepted: the configuration turns off the warnings a
// one-node cluster would otherwise always have (pool without redundancy, little
// free space on the lab's disk). The PGs count because just after a restart the
// monitor still says HEALTH_OK while no PG has been reported yet ("unknown").
func (s Status) Healthy() bool {
	return s.Health == "HEALTH_OK" && s.OSDsUp == 1 && s.OSDsIn == 1 && s.MgrAvailable && s.PGs == s.PGsActiveClean
}

func (s Status) String() string {
	str := fmt.Sprintf("%s, %d osd up, %d in, mgr available %v, %d/%d pgs active+clean", s.Health, s.OSDsUp, s.OSDsIn, s.MgrAvailable, s.PGsActiveClean, s.PGs)
	if len(s.Checks) > 0 {
		str += " (" + strings.Join(s.Checks, "; ") + ")"
	}
	return str
}

// ReadStatus asks the host's cluster for its status as client.admin.
func ReadStatus(ctx context.Context, exec Exec) (Status, error) {
	out, err := exec(ctx, nil, "ceph", "--connect-timeout", "10", "status", "-f", "json")
	if err != nil {
		return Status{}, fmt.Errorf("labceph: ceph status: %w", err)
	}
	return parseStatus(out)
}

func parseStatus(out []byte) (Status, error) {
	var s struct {
		Health struct {
			Status string `json:"status"`
			Checks map[string]struct {
				Summary struct {
					Message string `json:"message"`
				} `json:"summary"`
			} `json:"checks"`
		} `json:"health"`
		OSDMap map[string]json.RawMessage `json:"osdmap"`
		MgrMap struct {
			Available bool `json:"available"`
		} `json:"mgrmap"`
		PGMap struct {
			NumPGs     int `json:"num_pgs"`
			PGsByState []struct {
				State string `json:"state_name"`
				Count int    `json:"count"`
			} `json:"pgs_by_state"`
		} `json:"pgmap"`
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return Status{}, fmt.Errorf("labceph: ceph status -f json: %w", err)
	}
	st := Status{Health: s.Health.Status, MgrAvailable: s.MgrMap.Available, PGs: s.PGMap.NumPGs}
	for _, p := range s.PGMap.PGsByState {
		if p.State == "active+clean" {
			st.PGsActiveClean = p.Count
		}
	}
	for name, c := range s.Health.Checks {
		st.Checks = append(st.Checks, name+": "+c.Summary.Message)
	}
	sort.Strings(st.Checks)
	m := s.OSDMap
	if inner, ok := m["osdmap"]; ok { // older releases nest it
		_ = json.Unmarshal(inner, &m)
	}
	_ = json.Unmarshal(m["num_up_osds"], &st.OSDsUp)
	_ = json.Unmarshal(m["num_in_osds"], &st.OSDsIn)
	return st, nil
}

// WaitHealthy polls the host's cluster until it is Healthy or ctx ends; the
// error then says what it last was.
func WaitHealthy(ctx context.Context, exec Exec) (Status, error) {
	last := "no answer yet"
	for {
		st, err := ReadStatus(ctx, exec)
		if err == nil && st.Healthy() {
			return st, nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = st.String()
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("labceph: cluster not healthy (%s): %w", last, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}
