package membership

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/plinth-dev/plinth/internal/poll"
)

// profileMemberlistDefault is memberlist's own DefaultLANConfig untouched: the
// baseline the LAN profile is measured against (tests only).
const profileMemberlistDefault = "memberlist-default"

// BenchmarkDeadDetection50 is failure detection at size: 50 members on loopback
// (one a coordinator), one at a time crashed (no leave), and the time until the
// coordinator's pool reports it dead — the event that sets the host's Reachable to
// False — and, before the first crash, the CPU the idle pool costs a member (one
// process for all 50: a real host's agent also pays its own runtime's wake-ups).
// Each profile runs in the same process; compare median and max:
//
//	go test -run '^$' -bench DeadDetection50 -benchtime 8x ./pkg/membership/
func BenchmarkDeadDetection50(b *testing.B) {
	profiles[profileMemberlistDefault] = func(Role) *memberlist.Config { return memberlist.DefaultLANConfig() }
	defer delete(profiles, profileMemberlistDefault)
	const size = 50
	for _, prof := range []string{profileMemberlistDefault, ProfileLAN} {
		b.Run("profile="+prof, func(b *testing.B) {
			if b.N >= size {
				b.Fatalf("at most %d kills in a pool of %d", size-1, size)
			}
			b.StopTimer()
			key := newKey(b)
			cfg := func(name string, role Role, seeds ...string) Config {
				return Config{Name: name, Role: role, BindAddr: "127.0.0.1:0", Key: key, Seeds: seeds, Logger: testLogger(), Profile: prof}
			}
			coord := startCfg(b, cfg("coordinator", RoleCoordinator))
			members := []*testMember{coord}
			names := []string{"coordinator"}
			for i := 1; i < size; i++ {
				name := fmt.Sprintf("host-%02d", i)
				members = append(members, startCfg(b, cfg(name, RoleAgent, coord.LocalAddr())))
				names = append(names, name)
			}
			poll.True(b, 2*time.Minute, "every member sees all 50 alive", func() bool {
				for _, m := range members {
					if !allAlive(m.Pool, names...) {
						return false
					}
				}
				return true
			})
			const window = 10 * time.Second
			idle := idleCPU(b, window) / size
			var took []time.Duration
			for i := 0; i < b.N; i++ {
				victim := members[1+i]
				from := len(coord.events())
				began := time.Now()
				if err := victim.crash(); err != nil {
					b.Fatal(err)
				}
				poll.True(b, 2*time.Minute, "the coordinator sees "+victim.Name()+" dead", func() bool {
					return coord.hasEvent(from, func(ev Event) bool {
						return ev.Kind == EventLeave && ev.Member.Name == victim.Name() && !ev.Graceful
					})
				})
				took = append(took, time.Since(began))
			}
			slices.Sort(took)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
			b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
			b.ReportMetric(100*idle.Seconds()/window.Seconds(), "idle-%cpu/member")
			b.Logf("profile %s, %d members: dead detected in %v (median %v, max %v); idle CPU %v a member over %v", prof, size, took, took[len(took)/2], took[len(took)-1], idle, window)
		})
	}
}

// idleCPU is the process's CPU time (user + system) over window: with every member
// alive and nothing else running, what gossip and probing cost.
func idleCPU(b *testing.B, window time.Duration) time.Duration {
	b.Helper()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before := cpu()
	time.Sleep(window)
	return cpu() - before
}
