package api

import (
	"slices"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
)

// CephSpec prepares an existing Ceph cluster for the cloud: pools, cephx users and
// their keys. Plinth never deploys Ceph daemons; the steps run on one host (usually a
// controller) that holds the admin keyring.
type CephSpec struct {
	// Host runs the ceph.* steps. Default: the first controller.
	Host string `json:"host,omitempty"`
	// Monitors are the monitor addresses (ip, ip:port, v1:ip:port or v2:ip:port).
	// Empty: the "mon host" of ConfigFile.
	Monitors []string `json:"monitors,omitempty"`
	// ConfigFile is a ceph.conf on Host. Default when Monitors is empty too: the
	// agent's --ceph-conf (/etc/ceph/ceph.conf unless set).
	ConfigFile string `json:"configFile,omitempty"`
	// Keyring is the admin keyring on Host. Default: what ConfigFile says, else
	// /etc/ceph/ceph.<user>.keyring.
	Keyring string `json:"keyring,omitempty"`
	// User is the cephx identity the steps use, without "client.". Default admin.
	User string `json:"user,omitempty"`
	// OSDHosts is how many hosts carry OSDs; it sets the default replication
	// (size = min(3, OSDHosts)). Default: the hosts with role storage, else the
	// controllers (all-in-one sites).
	OSDHosts int `json:"osdHosts,omitempty"`
	// Defaults names the pools and users a site starts from: "openstack" (default:
	// pools kube-rbd, images, volumes, vms, backups and users kube-rbd, glance,
	// cinder, nova) or "none". Pools and Users override defaults by name.
	Defaults string     `json:"defaults,omitempty"`
	Pools    []CephPool `json:"pools,omitempty"`
	Users    []CephUser `json:"users,omitempty"`
}

// CephPool is one replicated pool.
type CephPool struct {
	// Name of the pool; a name of the defaults set overrides that pool.
	Name string `json:"name"`
	// Size is the number of replicas; MinSize the replicas needed to serve I/O.
	// Defaults: size min(3, osdHosts); minSize 1 for size 1 and 2, else 2.
	Size    int `json:"size,omitempty"`
	MinSize int `json:"minSize,omitempty"`
	// PGNum fixes the placement group count (a power of two) and turns the
	// autoscaler off for this pool; 0 leaves the pool to the autoscaler.
	PGNum int `json:"pgNum,omitempty"`
	// Application is enabled on the pool: rbd (default; the pool is also RBD
	// initialised), rgw, cephfs or another name.
	Application string    `json:"application,omitempty"`
	Quota       CephQuota `json:"quota,omitempty"`
	// CrushRule names an existing CRUSH rule for the pool.
	CrushRule string `json:"crushRule,omitempty"`
	// FailureDomain (host, osd, rack...) makes Plinth create and use a replicated
	// rule "replicated-<domain>[-<class>]" under root default; exclusive with CrushRule.
	FailureDomain string `json:"failureDomain,omitempty"`
	// DeviceClass restricts that rule to one device class (hdd, ssd, nvme).
	DeviceClass string `json:"deviceClass,omitempty"`
	// Delete removes the pool, which Plinth refuses while it holds RBD images.
	Delete bool `json:"delete,omitempty"`
}

// CephQuota limits a pool; zero values mean no limit.
type CephQuota struct {
	// MaxBytes is a byte count, optionally with a binary suffix: 500Gi, 2Ti.
	MaxBytes string `json:"maxBytes,omitempty"`
	// MaxObjects is the most objects the pool holds.
	MaxObjects int64 `json:"maxObjects,omitempty"`
}

// CephUser is a cephx client (client.<name>) whose key is handed to the charts.
type CephUser struct {
	// Name of the user without "client."; a name of the defaults set overrides that user.
	Name string `json:"name"`
	// Pools get "profile rbd pool=<p>" (read-write), ReadOnlyPools
	// "profile rbd-read-only pool=<p>"; mon gets "profile rbd".
	Pools         []string `json:"pools,omitempty"`
	ReadOnlyPools []string `json:"readOnlyPools,omitempty"`
	// Caps, when set, are used as they are (keys mon, osd, mgr, mds) instead.
	Caps map[string]string `json:"caps,omitempty"`
	// Delete removes the user.
	Delete bool `json:"delete,omitempty"`
}

// Ceph defaults.
const (
	CephDefaultsOpenStack = "openstack"
	CephDefaultsNone      = "none"
	DefaultCephDefaults   = CephDefaultsOpenStack
	DefaultCephUser       = cephspec.DefaultUser
	DefaultCephApp        = "rbd"
)

// Effective returns the spec with its own defaults applied, as the planner renders
// it: the user and the default set. Pools and users are completed by CephPools and
// CephUsers, the host by CephHost (they need the rest of the site). The stored
// manifest keeps the operator's zeros.
func (c CephSpec) Effective() CephSpec {
	setString(&c.User, DefaultCephUser)
	setString(&c.Defaults, DefaultCephDefaults)
	return c
}

// cephOpenStackPools and cephOpenStackUsers are the "openstack" defaults: the
// Kubernetes RBD provisioner's pool and the pools Glance, Cinder (and its backups)
// and Nova use, each with its own cephx user.
var (
	cephOpenStackPools = []string{"kube-rbd", "images", "volumes", "vms", "backups"}
	cephOpenStackUsers = []CephUser{
		{Name: "kube-rbd", Pools: []string{"kube-rbd"}},
		{Name: "glance", Pools: []string{"images"}},
		{Name: "cinder", Pools: []string{"volumes", "vms", "backups"}, ReadOnlyPools: []string{"images"}},
		{Name: "nova", Pools: []string{"vms"}, ReadOnlyPools: []string{"images"}},
	}
)

// CephHost is the host that runs the ceph steps.
func CephHost(s *SiteSpec) string {
	if s.Ceph != nil && s.Ceph.Host != "" {
		return s.Ceph.Host
	}
	if len(s.Controllers) > 0 {
		return s.Controllers[0]
	}
	return ""
}

// CephOSDHosts is the number of hosts with OSDs the default replication is sized
// for: ceph.osdHosts, else the hosts with role storage, else the controllers.
func CephOSDHosts(s *SiteSpec, hosts []Host) int {
	if s.Ceph != nil && s.Ceph.OSDHosts > 0 {
		return s.Ceph.OSDHosts
	}
	n := 0
	for _, h := range hosts {
		if slices.Contains(h.Spec.Roles, RoleStorage) {
			n++
		}
	}
	if n == 0 {
		n = len(s.Controllers)
	}
	return max(n, 1)
}

// CephPools returns the effective pools: the default set (unless defaults is none)
// overridden by name by the declared pools, then the other declared pools, with
// size, minSize and application filled in.
func CephPools(s *SiteSpec, hosts []Host) []CephPool {
	c := s.Ceph
	if c == nil {
		return nil
	}
	declared := map[string]CephPool{}
	for _, p := range c.Pools {
		if _, dup := declared[p.Name]; !dup {
			declared[p.Name] = p
		}
	}
	var out []CephPool
	used := map[string]bool{}
	if c.Defaults != CephDefaultsNone {
		for _, name := range cephOpenStackPools {
			p, ok := declared[name]
			if !ok {
				p = CephPool{Name: name}
			}
			out = append(out, p)
			used[name] = true
		}
	}
	for _, p := range c.Pools {
		if !used[p.Name] {
			out = append(out, p)
			used[p.Name] = true
		}
	}
	size := min(3, CephOSDHosts(s, hosts))
	for i := range out {
		p := &out[i]
		setInt(&p.Size, size)
		setInt(&p.MinSize, CephMinSize(p.Size))
		setString(&p.Application, DefaultCephApp)
	}
	return out
}

// CephMinSize is the default min_size for a replica count: 1 while there are at
// most two copies (a one- or two-node site keeps serving with one), else 2.
func CephMinSize(size int) int {
	if size <= 2 {
		return 1
	}
	return 2
}

// CephUsers returns the effective users: the default set (unless defaults is none)
// overridden by name by the declared users, then the other declared users.
func CephUsers(s *SiteSpec) []CephUser {
	c := s.Ceph
	if c == nil {
		return nil
	}
	declared := map[string]CephUser{}
	for _, u := range c.Users {
		if _, dup := declared[u.Name]; !dup {
			declared[u.Name] = u
		}
	}
	var out []CephUser
	used := map[string]bool{}
	if c.Defaults != CephDefaultsNone {
		for _, d := range cephOpenStackUsers {
			if u, ok := declared[d.Name]; ok {
				d = u
			}
			out = append(out, d)
			used[d.Name] = true
		}
	}
	for _, u := range c.Users {
		if !used[u.Name] {
			out = append(out, u)
			used[u.Name] = true
		}
	}
	return out
}

// CephRuleName is the CRUSH rule Plinth creates for a failure domain and device class.
func CephRuleName(domain, class string) string {
	if class == "" {
		return "replicated-" + domain
	}
	return "replicated-" + domain + "-" + class
}
