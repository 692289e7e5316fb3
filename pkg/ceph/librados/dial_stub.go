//go:build !ceph

package librados

import (
	"context"
	"errors"

	"github.com/plinth-dev/plinth/pkg/ceph"
	"github.com/plinth-dev/plinth/pkg/ceph/cephspec"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// Supported reports whether this binary was built with Ceph support.
const Supported = false

// ErrUnsupported is what every Ceph step fails with on an agent built without Ceph.
var ErrUnsupported = driver.Permanent(errors.New("this agent was built without Ceph support (build with -tags " + BuildTags + ")"))

// Dial fails: this build has no librados.
func Dial(context.Context, cephspec.Conn) (ceph.Cluster, error) { return nil, ErrUnsupported }
