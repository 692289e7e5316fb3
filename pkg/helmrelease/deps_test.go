package helmrelease

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentLinksNoHelm keeps the Helm SDK out of the agent: Helm runs on the
// coordinators' leader only, and the SDK adds tens of MiB to a binary.
func TestAgentLinksNoHelm(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go command to list dependencies: %v", err)
	}
	for _, tags := range []string{"ceph,pacific", ""} {
		out, err := exec.Command(goTool, "list", "-deps", "-tags="+tags, "github.com/plinth-dev/plinth/cmd/agent").Output()
		if err != nil {
			t.Fatalf("go list -deps -tags=%q cmd/agent: %v", tags, err)
		}
		for line := range strings.Lines(string(out)) {
			if p := strings.TrimSpace(line); strings.HasPrefix(p, "helm.sh/") || strings.HasSuffix(p, "/pkg/helmrelease") {
				t.Errorf("tags %q: cmd/agent links %s; the Helm SDK belongs to the coordinator", tags, p)
				break
			}
		}
	}
}
