// Package runpid tells which test run left something behind. Tests name what may
// outlive a killed run (directories, links, ledger files) with their pid, so the
// next run can remove what belongs to runs that have ended.
package runpid

import (
	"strconv"
	"strings"
	"syscall"
)

// Ended reports whether name, which starts with prefix then a pid (then "-" and
// anything, or nothing more), belongs to a process that no longer runs, and that
// pid. A name of another shape, or a pid still in use, gives false: when unsure,
// leave it.
func Ended(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	pidStr, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidStr)
	return pid, err == nil && pid > 0 && syscall.Kill(pid, 0) == syscall.ESRCH
}
