package plan

import (
	"fmt"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// BenchmarkHostConditions: one host of eight steps, half done and one running,
// read through a tally as the FSM hands them over: what every step start and
// result costs.
func BenchmarkHostConditions(b *testing.B) {
	var steps []Record
	for i := range 8 {
		r := Record{Step: step(fmt.Sprintf("h1/s%d", i), "1"), State: Pending, LastResult: &driver.Result{Changes: []string{"x"}}}
		switch {
		case i < 4:
			r.State = Succeeded
		case i == 4:
			r.State = Running
		}
		steps = append(steps, r)
	}
	byID := map[string]Record{}
	for _, r := range steps {
		byID[r.ID] = r
	}
	v := HostView{Name: "h1", Generation: 3, Enrolled: true, Reachable: api.ConditionTrue,
		Tally: TallyOf(steps), Step: func(id string) Record { return byID[id] }}
	prev := HostConditions(v, nil, t0)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		prev = HostConditions(v, prev, t0)
	}
}
