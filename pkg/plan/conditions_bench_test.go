package plan

import (
	"fmt"
	"testing"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
)

// BenchmarkHostConditions: one host of eight steps, in ID order as the FSM hands
// them over, half done and one running: what every step start and result costs.
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
	v := HostView{Name: "h1", Generation: 3, Enrolled: true, Reachable: api.ConditionTrue, Steps: steps}
	prev := HostConditions(v, nil, t0)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		prev = HostConditions(v, prev, t0)
	}
}
