package lab

import (
	"context"
	"fmt"
)

// The network host service gives every lab host a second spare veth pair,
// data1/data1p, next to data0/data0p. examples/lab/site.yaml puts data1 into a
// bridge that Plinth creates, so the lab exercises bridges, members and pool
// allocation for real; data1p stays up so the bridge has carrier. eth0, the
// management link, is never declared: a lab host must not lose its coordinators.
func init() { RegisterHostService("network", networkService) }

func networkService(ctx context.Context, _ *Lab, h *Host, _ HostSpec) ([]string, error) {
	for _, args := range [][]string{
		{"-n", h.NS, "link", "add", "data1", "type", "veth", "peer", "name", "data1p"},
		{"-n", h.NS, "link", "set", "data1p", "up"},
	} {
		if _, err := run(ctx, "ip", args...); err != nil {
			return nil, fmt.Errorf("lab: host %s: spare link data1: %w", h.Name, err)
		}
	}
	return nil, nil
}
