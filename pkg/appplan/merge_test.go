package appplan

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		layers  []Layer
		want    map[string]any
		origins map[string]string
	}{
		{"empty", nil, map[string]any{}, map[string]string{}},
		{"nested maps merge key by key",
			[]Layer{
				{OriginChart, map[string]any{"conf": map[string]any{"ceph": map[string]any{"enabled": false, "admin": "a"}}, "replicas": 1}},
				{OriginSystem, map[string]any{"conf": map[string]any{"ceph": map[string]any{"enabled": true}}}},
			},
			map[string]any{"conf": map[string]any{"ceph": map[string]any{"enabled": true, "admin": "a"}}, "replicas": 1},
			map[string]string{"conf.ceph.enabled": OriginSystem, "conf.ceph.admin": OriginChart, "replicas": OriginChart}},
		{"lists replace and are leaves",
			[]Layer{
				{OriginChart, map[string]any{"mons": []any{"a", "b"}}},
				{OriginUser, map[string]any{"mons": []any{"c"}}},
			},
			map[string]any{"mons": []any{"c"}}, map[string]string{"mons": OriginUser}},
		{"null deletes a key and what is under it",
			[]Layer{
				{OriginChart, map[string]any{"a": map[string]any{"b": 1, "c": 2}, "d": 3}},
				{OriginApplication, map[string]any{"a": nil}},
				{OriginUser, map[string]any{"d": nil, "e": nil}},
			},
			map[string]any{}, map[string]string{}},
		{"without the chart layer a null stays, for Helm to delete the chart's default",
			[]Layer{
				{OriginApplication, map[string]any{"a": map[string]any{"b": 1}, "d": 3}},
				{OriginUser, map[string]any{"a": map[string]any{"b": nil}, "g": nil}},
			},
			map[string]any{"a": map[string]any{"b": nil}, "d": 3, "g": nil},
			map[string]string{"a.b": OriginUser, "d": OriginApplication, "g": OriginUser}},
		{"null deletes one nested key",
			[]Layer{
				{OriginChart, map[string]any{"a": map[string]any{"b": 1, "c": 2}}},
				{OriginUser, map[string]any{"a": map[string]any{"b": nil}}},
			},
			map[string]any{"a": map[string]any{"c": 2}}, map[string]string{"a.c": OriginChart}},
		{"map replaces scalar",
			[]Layer{
				{OriginChart, map[string]any{"a": "x"}},
				{OriginSystem, map[string]any{"a": map[string]any{"b": true}}},
			},
			map[string]any{"a": map[string]any{"b": true}}, map[string]string{"a.b": OriginSystem}},
		{"scalar replaces map",
			[]Layer{
				{OriginChart, map[string]any{"a": map[string]any{"b": 1, "c": map[string]any{"d": 2}}}},
				{OriginUser, map[string]any{"a": "flat"}},
			},
			map[string]any{"a": "flat"}, map[string]string{"a": OriginUser}},
		{"empty map is a leaf",
			[]Layer{{OriginChart, map[string]any{"a": map[string]any{}}}, {OriginUser, map[string]any{"a": map[string]any{"b": 1}}}},
			map[string]any{"a": map[string]any{"b": 1}}, map[string]string{"a.b": OriginUser}},
		{"every key deleted leaves an empty map",
			[]Layer{{OriginChart, map[string]any{"a": map[string]any{"b": 1}}}, {OriginUser, map[string]any{"a": map[string]any{"b": nil}}}},
			map[string]any{"a": map[string]any{}}, map[string]string{"a": OriginUser}},
		{"higher layer wins over every lower one",
			[]Layer{
				{OriginChart, map[string]any{"x": 1}}, {OriginApplication, map[string]any{"x": 2}},
				{OriginSystem, map[string]any{"x": 3}}, {OriginUser, map[string]any{"x": 4}},
			},
			map[string]any{"x": 4}, map[string]string{"x": OriginUser}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.layers)
			got, origins := Merge(tc.layers...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("merged %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(origins, tc.origins) {
				t.Errorf("origins %v, want %v", origins, tc.origins)
			}
			if after, _ := json.Marshal(tc.layers); string(after) != string(before) {
				t.Errorf("inputs changed:\n%s\n%s", before, after)
			}
		})
	}
}

// TestMergeSharesNothing: changing the result never changes a layer.
func TestMergeSharesNothing(t *testing.T) {
	chart := map[string]any{"a": map[string]any{"b": []any{map[string]any{"c": 1}}}}
	got, _ := Merge(Layer{OriginChart, chart})
	got["a"].(map[string]any)["b"].([]any)[0].(map[string]any)["c"] = 2
	got["a"].(map[string]any)["new"] = true
	if want := map[string]any{"a": map[string]any{"b": []any{map[string]any{"c": 1}}}}; !reflect.DeepEqual(chart, want) {
		t.Errorf("layer changed to %v", chart)
	}
}
