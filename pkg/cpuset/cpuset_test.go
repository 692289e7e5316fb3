package cpuset

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string][]int{
		"0-3,8,10-11": {0, 1, 2, 3, 8, 10, 11},
		" 3,1,1-2 ":   {1, 2, 3},
		"":            nil,
		"5":           {5},
	} {
		if got, err := Parse(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1-x", "0-70000"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	for want, in := range map[string][]int{
		"0-3,8,10-11": {0, 1, 2, 3, 8, 10, 11},
		"5":           {5},
		"":            nil,
		"1,3":         {1, 3},
	} {
		if got := Format(in); got != want {
			t.Errorf("Format(%v) = %q, want %q", in, got, want)
		}
		if back, err := Parse(want); err != nil || !slices.Equal(back, in) {
			t.Errorf("Parse(Format(%v)) = %v, %v", in, back, err)
		}
	}
}
