package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
	"github.com/plinth-dev/plinth/pkg/kubeinstall/kubespec"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/wire"
)

const kubeSiteYAML = `apiVersion: plinth.dev/v1alpha1
kind: Site
metadata:
  name: lab
spec:
  controllers: [h1]
  networks:
  - name: mgmt
    role: mgmt
    cidr: 10.99.0.0/24
  kubernetes: {version: v1.37.2, serviceSubnet: 10.112.0.0/12}
`

// The coordinator generates the kube credentials, hands them only to the step that
// references them, seals kube.init's admin kubeconfig, and serves it to admins only.
// An agent stands in for h1 and reports every step it is given as done.
func TestKubeCredentialsAndKubeconfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, c0, _ := oneCoordinator(t, ctx, kubeSiteYAML+hostYAML("h1", 11))
	if out, err := l.CLI(ctx, "kubeconfig"); err == nil || !strings.Contains(out+err.Error(), "h1/kube.init has not succeeded yet") {
		t.Fatalf("before kube.init: %v %s", err, out)
	}
	agent := enrolAgent(t, ctx, l, c0, "h1")

	const kubeconfig = "apiVersion: v1\nkind: Config\n# the admin kubeconfig\n"
	var initInputs kubespec.InitInputs
	var etcdInputs kubespec.EtcdInputs
	poll.Until(t, 30*time.Second, "kube.init succeeded", func() error {
		var steps wire.AgentSteps
		if _, err := agent.Do(ctx, "GET", "/v1/agent/steps", nil, &steps); err != nil {
			return err
		}
		for _, st := range steps.Steps {
			if st.State != plan.Ready {
				continue
			}
			res := driver.Result{Changes: []string{"done by the test agent"}}
			switch st.Kind {
			case kubespec.KindInit:
				if err := json.Unmarshal(st.Inputs, &initInputs); err != nil {
					return err
				}
				res.Outputs = map[string]string{kubespec.OutputAdminConf: kubeconfig, kubespec.OutputCACertHash: "sha256:00"}
			case kubespec.KindEtcd:
				if err := json.Unmarshal(st.Inputs, &etcdInputs); err != nil {
					return err
				}
			}
			rep := wire.StepReport{ID: st.ID, InputsHash: st.InputsHash, Result: &res}
			if _, err := agent.Do(ctx, "POST", "/v1/agent/result", rep, nil); err != nil {
				return err
			}
		}
		if initInputs.Token == "" {
			return errTry
		}
		return nil
	})
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(initInputs.Token) || len(initInputs.CertificateKey) != 64 {
		t.Fatalf("generated credentials: token %q, key %d digits", initInputs.Token, len(initInputs.CertificateKey))
	}
	if _, err := certs.ParseCA(etcdInputs.CA); err != nil {
		t.Fatalf("generated etcd CA: %v", err)
	}

	// Only an admin gets the kubeconfig; the replicated state holds it sealed.
	poll.Until(t, 10*time.Second, "kubeconfig served", func() error {
		out, err := l.CLI(ctx, "kubeconfig")
		if err != nil {
			return err
		}
		if out != kubeconfig {
			return errTry
		}
		return nil
	})
	f := filepath.Join(t.TempDir(), "admin.conf")
	if _, err := l.CLI(ctx, "kubeconfig", "--write", f); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("--write: %v %v", st, err)
	}
	if _, err := agent.Do(ctx, "GET", "/v1/kubeconfig", nil, nil); client.StatusOf(err) != 403 {
		t.Fatalf("an agent must not read the kubeconfig: %v", err)
	}
	snap, err := exportOf(ctx, l, c0)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"the admin kubeconfig", initInputs.Token, initInputs.CertificateKey} {
		if strings.Contains(snap, secret) {
			t.Fatalf("%q found in the replicated state in the clear", secret)
		}
	}
	if !strings.Contains(snap, "KubeconfigRead") {
		t.Error("reading the kubeconfig should be recorded as an event")
	}
}

type tryAgain struct{}

func (tryAgain) Error() string { return "not yet" }

var errTry error = tryAgain{}
