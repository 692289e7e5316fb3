package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
)

// A roll-up kept up to date host by host (sets, replacements, removals, in any
// order) gives the site exactly the conditions a roll-up of the final hosts does.
func TestRollupIncrementalMatchesFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := append([]string{api.ConditionReady}, rolledUp...)
	randomConds := func() []api.Condition {
		var cs []api.Condition
		for _, typ := range types {
			switch rng.IntN(3) {
			case 0: // absent
			case 1:
				cs = append(cs, api.Condition{Type: typ, Status: api.ConditionTrue, Reason: "R" + typ, Message: fmt.Sprintf("%s m%d", typ, rng.IntN(100))})
			default:
				cs = append(cs, api.Condition{Type: typ, Status: api.ConditionFalse, Reason: "F"})
			}
		}
		return cs
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	certs := SiteCerts{CA: api.CertValidity{Name: "ca", NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * 365 * time.Hour)}}
	live := map[string][]api.Condition{}
	r := NewRollup()
	for step := range 2000 {
		name := fmt.Sprintf("h%02d", rng.IntN(40))
		if rng.IntN(5) == 0 {
			delete(live, name)
			r.Remove(name)
		} else {
			cs := randomConds()
			live[name] = cs
			r.Set(name, cs)
		}
		if step%50 != 0 {
			continue
		}
		var hosts []NamedConditions
		for n, cs := range live {
			hosts = append(hosts, NamedConditions{Name: n, Conditions: cs})
		}
		sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name > hosts[j].Name }) // any order
		want := SiteConditions(1, "", api.SiteSpec{}, hosts, certs, nil, now)
		got := SiteConditionsOf(1, "", api.SiteSpec{}, r, certs, nil, now)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: incremental roll-up\n got %+v\nwant %+v", step, got, want)
		}
	}
}
