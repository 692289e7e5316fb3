package membership

import "testing"

// TestProfilesLeaveTimeForIndirectProbes: a probe's ack timeout must end well
// before its interval, or the indirect probes and the TCP fallback that keep one
// lost packet from suspecting a live host get no time. In the lan profile the
// coordinators probe more often than agents (the agents' wake-ups are what a site
// pays on every host).
func TestProfilesLeaveTimeForIndirectProbes(t *testing.T) {
	for name, profile := range profiles {
		for _, role := range []Role{RoleAgent, RoleCoordinator} {
			mc := profile(role)
			if mc.ProbeTimeout <= 0 || mc.ProbeTimeout*2 > mc.ProbeInterval {
				t.Errorf("profile %s, %s: probe timeout %v for an interval of %v: want at most half", name, role, mc.ProbeTimeout, mc.ProbeInterval)
			}
		}
	}
	agent, coord := profiles[ProfileLAN](RoleAgent), profiles[ProfileLAN](RoleCoordinator)
	if coord.ProbeInterval >= agent.ProbeInterval {
		t.Errorf("lan: coordinators probe every %v, agents every %v: the coordinators should probe more often", coord.ProbeInterval, agent.ProbeInterval)
	}
}
