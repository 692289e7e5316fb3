package main

import (
	"os/exec"
	"strings"
	"testing"
)

func TestVersionFromGit(t *testing.T) {
	for _, tc := range []struct {
		describe string
		commits  int
		sha      string
		dirty    bool
		want     string
	}{
		{"", 812, "1a2b3c4", false, "0.0.0+git812.1a2b3c4"},
		{"", 812, "1a2b3c4", true, "0.0.0+git812.1a2b3c4.dirty"},
		{"v1.2.0-0-g1a2b3c4", 900, "1a2b3c4", false, "1.2.0"},
		{"v1.2.0-0-g1a2b3c4", 900, "1a2b3c4", true, "1.2.0+dirty"},
		{"v1.2.0-5-g1a2b3c4", 905, "1a2b3c4", false, "1.2.0+git5.1a2b3c4"},
		{"v1.3.0~rc1-2-gabcdef0", 905, "abcdef0", false, "1.3.0~rc1+git2.abcdef0"},
	} {
		got, err := versionFromGit(tc.describe, tc.commits, tc.sha, tc.dirty)
		if err != nil || got != tc.want {
			t.Errorf("versionFromGit(%q, %d, %q, %v) = %q, %v; want %q", tc.describe, tc.commits, tc.sha, tc.dirty, got, err, tc.want)
		}
	}
	if _, err := versionFromGit("release-1", 3, "abc", false); err == nil {
		t.Error("versionFromGit accepted a describe output it cannot map")
	}
}

// TestVersionsIncrease asks dpkg itself whether successive builds are upgrades.
func TestVersionsIncrease(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("dpkg is not installed: cannot compare Debian versions")
	}
	// Oldest first.
	order := []string{
		"0.0.0+git811.ffffff0",
		"0.0.0+git812.1a2b3c4",
		"0.0.0+git812.1a2b3c4.dirty",
		"0.0.0+git1000.0000000",
		"1.2.0~rc1",
		"1.2.0",
		"1.2.0+dirty",
		"1.2.0+git5.1a2b3c4",
		"1.2.0+git10.0000000",
		"1.2.1",
	}
	for i := 1; i < len(order); i++ {
		if err := exec.Command("dpkg", "--compare-versions", order[i-1], "lt", order[i]).Run(); err != nil {
			t.Errorf("dpkg does not see %s < %s", order[i-1], order[i])
		}
	}
}

func TestCheckVersion(t *testing.T) {
	for _, ok := range []string{"1.2.3", "0.0.0+git812.1a2b3c4", "1.2.3~rc1"} {
		if err := checkVersion(ok); err != nil {
			t.Errorf("checkVersion(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "v1.2.3", "1.2.3-1", "1:1.2.3", "1.2 3", "dev"} {
		err := checkVersion(bad)
		if err == nil {
			t.Errorf("checkVersion(%q) accepted it", bad)
		} else if !strings.Contains(err.Error(), "must start with a digit") {
			t.Errorf("checkVersion(%q): %v does not say what is valid", bad, err)
		}
	}
}
