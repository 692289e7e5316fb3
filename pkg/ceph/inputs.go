package ceph

import (
	"encoding/json"
	"fmt"

	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

func parsePool(raw json.RawMessage) (cephspec.PoolInputs, error) {
	var in cephspec.PoolInputs
	if err := driver.DecodeInputs(cephspec.KindPool, raw, &in); err != nil {
		return in, err
	}
	switch {
	case in.Name == "":
		return in, driver.Permanent(fmt.Errorf("ceph: pool: name is required"))
	case in.Delete:
		return in, nil
	case in.Size < 1 || in.MinSize < 1 || in.MinSize > in.Size:
		return in, driver.Permanent(fmt.Errorf("ceph: pool %q: size %d, min_size %d: want 1 <= min_size <= size", in.Name, in.Size, in.MinSize))
	case in.Application == "":
		return in, driver.Permanent(fmt.Errorf("ceph: pool %q: application is required", in.Name))
	case in.CrushRule == "" && in.FailureDomain != "":
		return in, driver.Permanent(fmt.Errorf("ceph: pool %q: failureDomain without crushRule", in.Name))
	}
	return in, nil
}

func parseUser(raw json.RawMessage) (cephspec.UserInputs, error) {
	var in cephspec.UserInputs
	if err := driver.DecodeInputs(cephspec.KindUser, raw, &in); err != nil {
		return in, err
	}
	if in.Name == "" {
		return in, driver.Permanent(fmt.Errorf("ceph: user: name is required"))
	}
	if !in.Delete && len(in.Caps) == 0 {
		return in, driver.Permanent(fmt.Errorf("ceph: user %q: caps are required", in.Name))
	}
	return in, nil
}
