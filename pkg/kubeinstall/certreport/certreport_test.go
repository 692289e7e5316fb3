package certreport

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
)

// Validity reads kubeadm's certificate files and the client certificates
// embedded in the kubeconfigs kubeadm renews; nothing on a host without them.
func TestValidity(t *testing.T) {
	root := t.TempDir()
	if got := Validity(root); got != nil {
		t.Fatalf("no kubeadm state: %+v", got)
	}
	now := time.Now()
	bundle, err := certs.NewCA("kubernetes", now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.ParseCA(bundle)
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(PKIDir+"/ca.crt", bundle)
	old := now.Add(-355 * 24 * time.Hour)
	leaf, _, err := ca.Issue(certs.Request{CommonName: "kube-apiserver", Server: true}, old)
	if err != nil {
		t.Fatal(err)
	}
	write(PKIDir+"/apiserver.crt", string(leaf))
	write(PKIDir+"/etcd/ca.crt", bundle)
	client, _, err := ca.Issue(certs.Request{CommonName: "kubernetes-admin"}, now)
	if err != nil {
		t.Fatal(err)
	}
	write(AdminConf, fmt.Sprintf("apiVersion: v1\nkind: Config\nusers:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: %s\n", base64.StdEncoding.EncodeToString(client)))
	write(SchedulerConf, "not yaml: [")

	got := Validity(root)
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	if fmt.Sprint(names) != "[apiserver.crt ca.crt etcd/ca.crt admin.conf]" {
		t.Fatalf("names %v", names)
	}
	if d := got[0].NotAfter.Sub(now); d > 11*24*time.Hour || d < 9*24*time.Hour {
		t.Fatalf("apiserver.crt expires in %v, want 10 days", d)
	}
	if d := got[3].NotAfter.Sub(now); d < 364*24*time.Hour {
		t.Fatalf("admin.conf expires in %v", d)
	}
}
