package api

func (v *validator) ceph(c *CephSpec) {
	seen := map[string]bool{}
	for i, pool := range c.Pools {
		p := index("site.spec.ceph.pools", key(pool.Name, i))
		switch {
		case pool.Name == "":
			v.add(p+".name", "required: the pool name")
		case seen[pool.Name]:
			v.add(p+".name", "duplicate pool name %q; pool names must be unique", clip(pool.Name))
		}
		seen[pool.Name] = true
		if pool.Size < 0 || pool.Size > 10 {
			v.add(p+".size", "%d is out of range; valid sizes are 1..10 (0 for the default)", pool.Size)
		}
	}
}
