package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/logbuf"
	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/driver"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/server"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// TestIntegrationCertificateExpiry runs a real coordinator issuing 20-second agent
// certificates (its agentCertTTL setting) and a real agent: the agent renews before
// expiry and the host's CertificateExpiring stays False; with the agent stopped
// (renewal blocked) the condition turns True with a warning event within the last
// quarter of the lifetime, before expiry; restarted, the agent renews and the
// condition clears. describe's certificate list carries the agent's expiry and the CA's.
func TestIntegrationCertificateExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator: skipped with -short")
	}
	const ttl = 20 * time.Second
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("PLINTH_TEST_LOGS") != "" {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tc := startCoordinator(t, ctx, log, ttl)
	dir, ccfg, admin := tc.dir, tc.cfg, tc.admin
	var tok wire.TokenResponse
	poll.Until(t, 20*time.Second, "coordinator accepts writes", func() error {
		_, err := admin.Do(ctx, "POST", wire.PathTokens, wire.TokenRequest{Name: "node-1", Role: "agent", TTL: time.Hour}, &tok)
		return err
	})
	apply(t, ctx, admin, hostYAML(1500))
	stateDir := filepath.Join(dir, "agent")
	if err := Join(ctx, JoinOptions{StateDir: stateDir, Name: "node-1", Token: tok.Token, JoinAddrs: []string{ccfg.JoinAddr}}); err != nil {
		t.Fatalf("join: %v", err)
	}
	// serial reads the live bundle only: LoadBundle would also finish (and remove)
	// a renewal the running agent is staging, racing its writes.
	serial := func() (string, error) {
		b, err := pki.LoadBundle(pkiPath(stateDir), bundleName)
		if err != nil {
			return "", err
		}
		c, err := pki.ParseCert(b.CertPEM)
		if err != nil {
			return "", err
		}
		return c.SerialNumber.Text(16), nil
	}
	gossipAddr := freeAddr(t)
	start := func() func() {
		reg, err := driver.NewRegistry(newFakeNet())
		if err != nil {
			t.Fatal(err)
		}
		actx, astop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- Run(actx, Config{StateDir: stateDir, GossipAddr: gossipAddr, GossipProfile: "fast",
				FactsInterval: time.Second, Logger: log.With("who", "agent"), Drivers: reg})
		}()
		return func() {
			astop()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("agent Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("agent did not stop within 20s")
			}
		}
	}
	detail := func() server.HostDetail {
		var d server.HostDetail
		if _, err := admin.Do(ctx, "GET", "/v1/hosts/node-1", nil, &d); err != nil {
			t.Fatalf("describe host: %v", err)
		}
		return d
	}
	expiring := func(d server.HostDetail) api.Condition {
		if c := plan.Find(d.Host.Host.Status.Conditions, api.ConditionCertificateExpiring); c != nil {
			return *c
		}
		return api.Condition{}
	}

	// Renewed twice, at half-life: never a warning.
	stop := start()
	prev, err := serial()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		poll.Until(t, 2*ttl, fmt.Sprintf("renewal %d", i+1), func() error {
			s, err := serial()
			if err != nil {
				return err // a renewal mid-write: the next poll reads it whole
			}
			if s == prev {
				return errors.New("serial unchanged")
			}
			prev = s
			return nil
		})
		if c := expiring(detail()); c.Status != api.ConditionFalse {
			t.Fatalf("after renewal %d: CertificateExpiring %+v", i+1, c)
		}
	}
	d := detail()
	if len(d.Certificates) != 2 || d.Certificates[0].Name != plan.CertAgent || d.Certificates[1].Name != plan.CertSiteCA {
		t.Fatalf("describe certificates: %+v", d.Certificates)
	}
	if left := time.Until(d.Certificates[0].NotAfter); left <= 0 || left > ttl {
		t.Fatalf("agent certificate expires in %v, want within %v", left, ttl)
	}

	// Renewal blocked: the agent is down. The warning comes before expiry.
	stop()
	var c api.Condition
	poll.Until(t, ttl, "CertificateExpiring with the agent stopped", func() error {
		d = detail()
		if c = expiring(d); c.Status != api.ConditionTrue {
			return fmt.Errorf("CertificateExpiring %+v", c)
		}
		return nil
	})
	if notAfter := d.Certificates[0].NotAfter; !time.Now().Before(notAfter.Add(time.Second)) {
		t.Errorf("warned only after expiry (%s)", notAfter)
	}
	if !strings.Contains(c.Message, "has not been renewed") || !strings.Contains(c.Message, "journalctl -u plinth-agent") {
		t.Fatalf("message: %q", c.Message)
	}
	found := false
	for _, e := range d.Events {
		found = found || (e.Reason == api.ConditionCertificateExpiring && e.Type == "Warning")
	}
	if !found {
		t.Fatalf("no CertificateExpiring event in %+v", d.Events)
	}

	// Back: the agent renews at start (past half-life), and the condition clears.
	stop = start()
	defer stop()
	poll.Until(t, 2*ttl, "CertificateExpiring cleared after renewal", func() error {
		if c := expiring(detail()); c.Status != api.ConditionFalse {
			return fmt.Errorf("CertificateExpiring %+v", c)
		}
		return nil
	})
}
