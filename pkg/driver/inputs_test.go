package driver

import (
	"encoding/json"
	"strings"
	"testing"
)

type testInputs struct {
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"`
	Inner struct {
		Port int `json:"port"`
	} `json:"inner"`
}

func TestDecodeInputs(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      testInputs
		// errWant are the substrings the error must hold; none means no error.
		errWant []string
	}{
		{name: "object", raw: `{"name":"a","count":2,"inner":{"port":7}}`, want: testInputs{Name: "a", Count: 2, Inner: struct {
			Port int `json:"port"`
		}{7}}},
		{name: "surrounding space", raw: " \n{\"name\":\"a\"}\n ", want: testInputs{Name: "a"}},
		{name: "null", raw: `null`},
		{name: "unknown field", raw: `{"name":"a","colour":"red"}`, errWant: []string{"test.kind: invalid inputs", `unknown field "colour"`}},
		{name: "unknown nested field", raw: `{"inner":{"port":1,"host":"x"}}`, errWant: []string{`unknown field "host"`}},
		{name: "wrong type", raw: `{"name":"a","count":"2"}`, errWant: []string{"field count", "string", "int"}},
		{name: "wrong nested type", raw: `{"inner":{"port":true}}`, errWant: []string{"field inner.port", "bool"}},
		{name: "not an object", raw: `[1]`, errWant: []string{"got JSON array"}},
		{name: "two values", raw: `{"name":"a"}{"name":"b"}`, errWant: []string{"trailing data", "exactly one value"}},
		{name: "trailing garbage", raw: `{"name":"a"}}`, errWant: []string{"trailing data"}},
		{name: "truncated", raw: `{"name":`, errWant: []string{"truncated JSON"}},
		{name: "syntax", raw: `{"name" "a"}`, errWant: []string{"not JSON at offset"}},
		{name: "empty", raw: ``, errWant: []string{"empty"}},
		{name: "blank", raw: " \n", errWant: []string{"empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got testInputs
			err := DecodeInputs("test.kind", json.RawMessage(tc.raw), &got)
			if len(tc.errWant) == 0 {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				if got != tc.want {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, decoded %+v", got)
			}
			if !IsPermanent(err) {
				t.Errorf("err %v is not Permanent", err)
			}
			for _, s := range append(tc.errWant, "test.kind: invalid inputs: ") {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err %q does not say %q", err, s)
				}
			}
		})
	}
}
