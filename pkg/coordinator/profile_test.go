package coordinator_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// An admin reads a coordinator's runtime profiles (pprof's gzip format); an agent
// may not, and a bad name or duration is refused with what would be valid.
func TestProfilesForAdminsOnly(t *testing.T) {
	c := newCluster(t)
	a := c.enrol("node-1")
	gzip := []byte{0x1f, 0x8b}
	for _, path := range []string{wire.ProfilePath("cpu", 1), wire.ProfilePath("heap", 0), wire.ProfilePath("goroutine", 0)} {
		var buf bytes.Buffer
		if _, err := c.admins[0].Do(c.ctx, "GET", path, nil, &buf); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !bytes.HasPrefix(buf.Bytes(), gzip) {
			t.Fatalf("%s: %d bytes, not a pprof profile", path, buf.Len())
		}
	}
	refused := []struct {
		cl   *client.Client
		path string
		code int
		msg  string
	}{
		{a.clients[0], wire.PathProfile + "heap", http.StatusForbidden, "needs role"},
		{c.admins[0], wire.PathProfile + "nope", http.StatusNotFound, "valid: cpu, allocs"},
		{c.admins[0], wire.PathProfile + "cpu?seconds=0", http.StatusBadRequest, "from 1 to 300"},
		{c.admins[0], wire.PathProfile + "cpu?seconds=x", http.StatusBadRequest, "from 1 to 300"},
	}
	for _, tt := range refused {
		var buf bytes.Buffer
		_, err := tt.cl.Do(c.ctx, "GET", tt.path, nil, &buf)
		if client.StatusOf(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v (status %d), want %d mentioning %q", tt.path, err, client.StatusOf(err), tt.code, tt.msg)
		}
	}
}
