package runpid

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

func TestEnded(t *testing.T) {
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	gone, self := done.Process.Pid, os.Getpid()
	for _, tc := range []struct {
		name string
		want bool
	}{
		{fmt.Sprintf("run-%d-x1", gone), true},
		{fmt.Sprintf("run-%d", gone), true},
		{fmt.Sprintf("run-%d-x1", self), false},
		{fmt.Sprintf("other-%d", gone), false},
		{"run-abc-1", false},
		{"run--1", false},
		{"run-0", false},
	} {
		if _, got := Ended(tc.name, "run-"); got != tc.want {
			t.Errorf("Ended(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
