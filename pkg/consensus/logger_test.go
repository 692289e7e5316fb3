package consensus

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	root := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l := newHCLog(root, "raft").Named("net").With("peer", "b")
	if l.IsDebug() || !l.IsInfo() || l.GetLevel() != hclog.Info {
		t.Fatalf("levels: debug=%v info=%v level=%v", l.IsDebug(), l.IsInfo(), l.GetLevel())
	}
	l.Debug("hidden")
	l.Warn("shown", "servers", hclog.Fmt("%d servers", 3))
	l.StandardLogger(nil).Print("from std")
	out := buf.String()
	for _, want := range []string{"level=WARN", "msg=shown", "logger=raft.net", "peer=b", `servers="3 servers"`, `msg="from std"`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %q", want, out)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Errorf("debug line logged: %q", out)
	}
}
