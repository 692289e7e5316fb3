//go:build !ceph

package librados_test

import (
	"context"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/ceph"
	"github.com/plinth-dev/plinth/pkg/ceph/librados"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// Without -tags ceph the drivers still register, and every step fails for good with
// the reason and the fix.
func TestWithoutCephSupportStepsFailPermanently(t *testing.T) {
	_, pool, _ := ceph.NewClient(librados.Dial).Drivers()
	r := driver.Run(context.Background(), pool, []byte(`{"cluster":{"monitors":["127.0.0.1"]},"name":"p","size":1,"minSize":1,"application":"rbd"}`))
	want := "this agent was built without Ceph support (build with -tags ceph,pacific)"
	if r.OK() || r.Retryable || !strings.Contains(r.Error, want) {
		t.Errorf("result %+v, want a permanent %q", r, want)
	}
}
