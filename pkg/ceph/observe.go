package ceph

import (
	"fmt"
	"strings"
)

// poolState is one pool as "osd pool ls detail" reports it.
type poolState struct {
	ID              int64                        `json:"pool_id"`
	Name            string                       `json:"pool_name"`
	Size            int                          `json:"size"`
	MinSize         int                          `json:"min_size"`
	CrushRule       int                          `json:"crush_rule"`
	AutoscaleMode   string                       `json:"pg_autoscale_mode"`
	PGNum           int                          `json:"pg_num"`
	PGNumTarget     int                          `json:"pg_num_target"`
	QuotaMaxBytes   int64                        `json:"quota_max_bytes"`
	QuotaMaxObjects int64                        `json:"quota_max_objects"`
	Applications    map[string]map[string]string `json:"application_metadata"`
}

// crushRule is one rule of "osd crush rule dump".
type crushRule struct {
	ID    int    `json:"rule_id"`
	Name  string `json:"rule_name"`
	Steps []struct {
		Op       string `json:"op"`
		ItemName string `json:"item_name,omitempty"`
		Type     string `json:"type,omitempty"`
	} `json:"steps"`
}

// domain is the rule's failure domain (the type its choose step picks) and root.
func (r crushRule) domain() (root, class, typ string) {
	for _, s := range r.Steps {
		switch {
		case s.Op == "take":
			root, class, _ = strings.Cut(s.ItemName, "~")
		case strings.HasPrefix(s.Op, "choose"):
			typ = s.Type
		}
	}
	return root, class, typ
}

// osdTree is "osd tree": buckets and OSDs by id.
type osdTree struct {
	Nodes []treeNode `json:"nodes"`
}

type treeNode struct {
	ID       int     `json:"id"`
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Children []int   `json:"children,omitempty"`
	Status   string  `json:"status,omitempty"`
	Reweight float64 `json:"reweight,omitempty"`
	Class    string  `json:"device_class,omitempty"`
}

// domains counts the buckets of type typ under root that hold at least one OSD that
// is up and in (of class, when set): how many replicas CRUSH can place apart.
func (t osdTree) domains(root, class, typ string) int {
	byID := map[int]treeNode{}
	for _, n := range t.Nodes {
		byID[n.ID] = n
	}
	var usable func(id int) bool
	usable = func(id int) bool {
		n := byID[id]
		if n.Type == "osd" {
			return n.Status == "up" && n.Reweight > 0 && (class == "" || n.Class == class)
		}
		for _, c := range n.Children {
			if usable(c) {
				return true
			}
		}
		return false
	}
	count := 0
	seen := map[int]bool{}
	var walk func(id int)
	walk = func(id int) {
		if seen[id] {
			return
		}
		seen[id] = true
		n := byID[id]
		if n.Type == typ {
			if usable(id) {
				count++
			}
			return
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, n := range t.Nodes {
		if n.Name == root && n.Type != "osd" {
			walk(n.ID)
		}
	}
	return count
}

// topology is what a pool diff needs to know about the cluster besides the pool.
type topology struct {
	rules []crushRule
	tree  osdTree
}

func (t topology) rule(name string) (crushRule, bool) {
	for _, r := range t.rules {
		if r.Name == name {
			return r, true
		}
	}
	return crushRule{}, false
}

func (t topology) ruleName(id int) string {
	for _, r := range t.rules {
		if r.ID == id {
			return r.Name
		}
	}
	return fmt.Sprintf("rule %d", id)
}

func listPools(cl Cluster) ([]poolState, error) {
	var pools []poolState
	if err := mon(cl, cmd{"prefix": "osd pool ls", "detail": "detail"}, &pools); err != nil {
		return nil, fmt.Errorf("ceph: list pools: %w", err)
	}
	return pools, nil
}

func observeTopology(cl Cluster) (topology, error) {
	var t topology
	if err := mon(cl, cmd{"prefix": "osd crush rule dump"}, &t.rules); err != nil {
		return t, fmt.Errorf("ceph: list CRUSH rules: %w", err)
	}
	if err := mon(cl, cmd{"prefix": "osd tree"}, &t.tree); err != nil {
		return t, fmt.Errorf("ceph: read OSD tree: %w", err)
	}
	return t, nil
}

// configValue is the value of name in the mon config database for who, if set.
func configValue(cl Cluster, who, name string) (string, bool, error) {
	var entries []struct {
		Section string `json:"section"`
		Name    string `json:"name"`
		Value   string `json:"value"`
	}
	if err := mon(cl, cmd{"prefix": "config dump"}, &entries); err != nil {
		return "", false, fmt.Errorf("ceph: read config: %w", err)
	}
	for _, e := range entries {
		if e.Section == who && e.Name == name {
			return e.Value, true, nil
		}
	}
	return "", false, nil
}
