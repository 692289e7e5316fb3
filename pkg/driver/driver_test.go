package driver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// fakeDriver is a test double: a map of keys to values standing in for a host, with
// an optional knock-on effect (applying one key clears another).
type fakeDriver struct {
	have    map[string]string
	want    map[string]string
	knock   map[string]string // applying key K deletes key V
	applied []string
	failOn  string
}

func (f *fakeDriver) Kind() string { return "fake" }

func (f *fakeDriver) Diff(context.Context, json.RawMessage) ([]Change, error) {
	var cs []Change
	for _, k := range []string{"a", "b", "c"} {
		if v, ok := f.want[k]; ok && f.have[k] != v {
			k, v := k, v
			cs = append(cs, Change{Summary: "set " + k, Apply: func(context.Context) error {
				if k == f.failOn {
					return Permanent(errors.New("no such thing"))
				}
				f.have[k] = v
				f.applied = append(f.applied, k)
				if other, ok := f.knock[k]; ok {
					delete(f.have, other)
				}
				return nil
			}})
		}
	}
	return cs, nil
}

func TestRunConvergesAcrossPasses(t *testing.T) {
	f := &fakeDriver{have: map[string]string{}, want: map[string]string{"a": "1", "b": "2"}, knock: map[string]string{"b": "a"}}
	res := Run(context.Background(), f, nil)
	if !res.OK() || f.have["a"] != "1" || f.have["b"] != "2" {
		t.Fatalf("not converged: %+v %v", res, f.have)
	}
	if strings.Join(res.Changes, ",") != "set a,set b,set a" {
		t.Fatalf("changes %v", res.Changes)
	}
	again := Run(context.Background(), f, nil)
	if !again.OK() || len(again.Changes) != 0 {
		t.Fatalf("second run not a no-op: %+v", again)
	}
}

func TestRunGivesUpOnAFight(t *testing.T) {
	// a and b keep undoing each other: Run must stop and say what still differs.
	f := &fakeDriver{have: map[string]string{}, want: map[string]string{"a": "1", "b": "2"}, knock: map[string]string{"a": "b", "b": "a"}}
	res := Run(context.Background(), f, nil)
	if res.OK() || !strings.Contains(res.Error, "still differs after apply") || !res.Retryable {
		t.Fatalf("want a retryable verify failure, got %+v", res)
	}
}

func TestRunPermanentFailure(t *testing.T) {
	f := &fakeDriver{have: map[string]string{}, want: map[string]string{"c": "3"}, failOn: "c"}
	res := Run(context.Background(), f, nil)
	if res.OK() || res.Retryable || !strings.Contains(res.Error, `apply "set c"`) {
		t.Fatalf("want a permanent apply failure, got %+v", res)
	}
}

func TestCheckReportsWithoutApplying(t *testing.T) {
	f := &fakeDriver{have: map[string]string{"a": "0"}, want: map[string]string{"a": "1"}}
	drift, err := Check(context.Background(), f, nil)
	if err != nil || len(drift) != 1 || len(f.applied) != 0 {
		t.Fatalf("check: %v %v %v", drift, err, f.applied)
	}
}

func TestRegistryRefusesDuplicates(t *testing.T) {
	if _, err := NewRegistry(&fakeDriver{}, &fakeDriver{}); err == nil {
		t.Fatal("duplicate kind accepted")
	}
}
