package kubeinstall

import (
	"errors"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// One clientset per kubeconfig for the life of the process; a failure is not kept.
func TestReuseClients(t *testing.T) {
	built := 0
	fail := true
	f := reuseClients(func(kc []byte) (API, error) {
		built++
		if string(kc) == "bad" && fail {
			return nil, errors.New("bad kubeconfig")
		}
		return clientsetAPI{fake.NewClientset()}, nil
	})
	a1, _ := f([]byte("admin"))
	a2, _ := f([]byte("admin"))
	b, _ := f([]byte("other"))
	if a1 != a2 || a1 == b || built != 2 {
		t.Fatalf("same kubeconfig gave another clientset, or another one the same (%d built)", built)
	}
	if _, err := f([]byte("bad")); err == nil {
		t.Fatal("error not returned")
	}
	fail = false
	if c, err := f([]byte("bad")); err != nil || c == nil || built != 4 {
		t.Fatalf("a failed build was kept: %v (%d built)", err, built)
	}
}
