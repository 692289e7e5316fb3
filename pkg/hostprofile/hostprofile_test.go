package hostprofile

import (
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	if p, err := Lookup(""); err != nil || p.RuncBinary != "" || p.AllowCgroupV1 {
		t.Fatalf("a real host needs no profile: %+v %v", p, err)
	}
	if p, err := Lookup("nspawn-lab"); err != nil || p.RuncBinary != RuncLab || !p.AllowCgroupV1 {
		t.Fatalf("nspawn-lab: %+v %v", p, err)
	}
	if _, err := Lookup("lab"); err == nil || !strings.Contains(err.Error(), "valid profiles are nspawn-lab") {
		t.Fatalf("unknown profile: %v", err)
	}
}
