package ceph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// HealthDriver runs the ceph.health step, which the pool steps wait for: it fails,
// naming the cause, while the cluster is HEALTH_ERR or has OSDs down, and a drift
// check reports the same findings once it has succeeded. Plinth does not repair
// Ceph; these changes only wait for the cluster.
type HealthDriver struct{ c *Client }

// Kind implements driver.Driver.
func (d *HealthDriver) Kind() string { return cephspec.KindHealth }

// errWaitCluster is what applying a health finding returns: retrying later may help.
var errWaitCluster = errors.New("waiting for the cluster to recover (Plinth prepares pools and users; it does not repair Ceph daemons)")

// Diff implements driver.Driver.
func (d *HealthDriver) Diff(ctx context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in cephspec.HealthInputs
	if err := driver.DecodeInputs(cephspec.KindHealth, raw, &in); err != nil {
		return nil, err
	}
	cl, err := d.c.session(ctx, in.Cluster)
	if err != nil {
		return nil, err
	}
	var st clusterStatus
	err = mon(cl, cmd{"prefix": "status"}, &st)
	d.c.forget(in.Cluster, err)
	if err != nil {
		return nil, fmt.Errorf("ceph: read cluster status: %w", err)
	}
	var out []driver.Change
	for _, p := range st.problems() {
		out = append(out, driver.Change{Summary: p, Apply: func(context.Context) error { return errWaitCluster }})
	}
	return out, nil
}

// Outputs implements driver.Outputter: the cluster's fsid and monitor addresses,
// which Kubernetes' RBD provisioner and the OpenStack charts are configured with.
func (d *HealthDriver) Outputs(ctx context.Context, raw json.RawMessage) (map[string]string, error) {
	var in cephspec.HealthInputs
	if err := driver.DecodeInputs(cephspec.KindHealth, raw, &in); err != nil {
		return nil, err
	}
	cl, err := d.c.session(ctx, in.Cluster)
	if err != nil {
		return nil, err
	}
	var m monMap
	err = mon(cl, cmd{"prefix": "mon dump"}, &m)
	d.c.forget(in.Cluster, err)
	if err != nil {
		return nil, fmt.Errorf("ceph: read the monitor map: %w", err)
	}
	return map[string]string{cephspec.OutputFSID: m.FSID, cephspec.OutputMonitors: strings.Join(m.addrs(), ",")}, nil
}

// clusterStatus is the part of "status" the health step reads.
type clusterStatus struct {
	Health struct {
		Status string `json:"status"`
		Checks map[string]struct {
			Severity string `json:"severity"`
			Summary  struct {
				Message string `json:"message"`
			} `json:"summary"`
		} `json:"checks"`
	} `json:"health"`
	OSDMap json.RawMessage `json:"osdmap"`
}

type osdCounts struct {
	NumOSDs   int `json:"num_osds"`
	NumUpOSDs int `json:"num_up_osds"`
	NumInOSDs int `json:"num_in_osds"`
}

// osds reads the OSD counts, which older releases nest one level deeper.
func (s clusterStatus) osds() osdCounts {
	var wrapped struct {
		OSDMap *osdCounts `json:"osdmap"`
	}
	if json.Unmarshal(s.OSDMap, &wrapped) == nil && wrapped.OSDMap != nil {
		return *wrapped.OSDMap
	}
	var c osdCounts
	_ = json.Unmarshal(s.OSDMap, &c)
	return c
}

// problems names what keeps the cluster from taking pools: HEALTH_ERR (with its
// error checks), no OSDs, or OSDs down.
func (s clusterStatus) problems() []string {
	var out []string
	if s.Health.Status == "HEALTH_ERR" {
		var errs []string
		for name, c := range s.Health.Checks {
			if c.Severity == "HEALTH_ERR" {
				errs = append(errs, name+": "+c.Summary.Message)
			}
		}
		sort.Strings(errs)
		out = append(out, "cluster health HEALTH_ERR: "+strings.Join(errs, "; "))
	}
	o := s.osds()
	switch {
	case o.NumOSDs == 0:
		out = append(out, "the cluster has no OSDs")
	case o.NumUpOSDs < o.NumInOSDs || o.NumUpOSDs == 0:
		msg := fmt.Sprintf("%d of %d OSDs down", o.NumInOSDs-o.NumUpOSDs, o.NumInOSDs)
		if o.NumUpOSDs == 0 {
			msg = fmt.Sprintf("no OSD is up (%d in the cluster)", o.NumOSDs)
		}
		if c, ok := s.Health.Checks["OSD_DOWN"]; ok {
			msg += " (OSD_DOWN: " + c.Summary.Message + ")"
		}
		out = append(out, msg)
	}
	return out
}

// monMap is the part of "mon dump" the outputs need.
type monMap struct {
	FSID string `json:"fsid"`
	Mons []struct {
		PublicAddrs struct {
			AddrVec []struct {
				Type string `json:"type"`
				Addr string `json:"addr"`
			} `json:"addrvec"`
		} `json:"public_addrs"`
	} `json:"mons"`
}

// addrs lists each monitor's v1 address (what most clients are configured with),
// or its v2 address when it has no v1.
func (m monMap) addrs() []string {
	var out []string
	for _, mon := range m.Mons {
		best := ""
		for _, a := range mon.PublicAddrs.AddrVec {
			if a.Type == "v1" || best == "" {
				best = a.Addr
			}
		}
		if best != "" {
			out = append(out, best)
		}
	}
	return out
}
