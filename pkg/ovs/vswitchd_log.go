package ovs

import (
	"io"
	"os"
	"slices"
	"strings"
)

// logHint quotes the last DPDK errors from ovs-vswitchd's log, best effort: when
// DPDK fails the database only says dpdk_initialized=false.
func (o *options) logHint() string {
	f, err := os.Open(o.logFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > tail {
		_, _ = f.Seek(-tail, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	var hits []string
	for line := range strings.Lines(string(b)) {
		if (strings.Contains(line, "|dpdk|") || strings.Contains(line, "|netdev_dpdk|")) &&
			(strings.Contains(line, "|ERR|") || strings.Contains(line, "|EMER|")) || strings.Contains(line, "DPDK not supported") {
			// 2026-11-29T23:26:33.788Z|00133|dpdk|ERR|EAL: ... -> keep the message
			parts := strings.SplitN(strings.TrimSpace(line), "|", 5)
			hits = append(hits, parts[len(parts)-1])
		}
	}
	if len(hits) == 0 {
		return ""
	}
	hits = slices.Compact(hits[max(0, len(hits)-3):])
	return "; ovs-vswitchd log: " + strings.Join(hits, " / ")
}
