package ceph

import (
	"fmt"
	"sort"
	"strings"
)

// capsArgs renders caps as the flat list "auth get-or-create" and "auth caps" take:
// ["mon", "profile rbd", "osd", "..."], in key order.
func capsArgs(caps map[string]string) []string {
	keys := make([]string, 0, len(caps))
	for k := range caps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		out = append(out, k, caps[k])
	}
	return out
}

// capsString renders caps for a summary: mon 'profile rbd'; osd '...'.
func capsString(caps map[string]string) string {
	a := capsArgs(caps)
	parts := make([]string, 0, len(a)/2)
	for i := 0; i+1 < len(a); i += 2 {
		parts = append(parts, fmt.Sprintf("%s '%s'", a[i], a[i+1]))
	}
	if len(parts) == 0 {
		return "no caps"
	}
	return strings.Join(parts, "; ")
}
