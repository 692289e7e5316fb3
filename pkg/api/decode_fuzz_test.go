package api

import "testing"

// FuzzDecode feeds arbitrary bytes through the whole pipeline the coordinator runs on
// an operator's upload. Any panic is a bug: a bad manifest must be an error, never a
// crashed coordinator.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(exampleYAML))
	f.Add([]byte(hostYAML("compute-0", "worker", 21)))
	f.Add([]byte("---\n---\n...\n"))
	f.Add([]byte("apiVersion: plinth.dev/v1alpha1\nkind: Site\nspec: {networks: [{name: a, cidr: 10.0.0.1/24}], kubernetes: {}}\n"))
	f.Add([]byte("apiVersion: plinth.dev/v1alpha1\nkind: Host\nmetadata: {name: a}\nspec: {routes: [{to: default, via: '::1'}]}\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("--- {apiVersion: v1}\n... # end\n\xef\xbb\xbf\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode("fuzz.yaml", data)
		if err != nil {
			if m != nil {
				t.Fatal("manifest returned with an error")
			}
			if _, ok := err.(ErrorList); !ok {
				t.Fatalf("error is %T, not ErrorList", err)
			}
			_ = err.Error()
			return
		}
		m.Default()
		_ = m.Validate("fuzz.yaml").Error()
		_ = SpecHash(m)
	})
}
