package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/client"
	"github.com/plinth-dev/plinth/pkg/lab"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// plinthResults is everything measured on Plinth.
type plinthResults struct {
	tokens   writeResult // admin POST /v1/tokens
	facts    writeResult // agent POST /v1/agent/facts, facts changed every time
	failover failoverResult
}

// benchPlinth runs the Plinth half: a 3-member cluster from pkg/lab, the two write
// workloads, then the failover runs. Everything it starts is gone when it returns.
func benchPlinth(ctx context.Context, o options, dir string) (*plinthResults, error) {
	base, err := freeBase(12) // 3 coordinators x (api, join, raft, gossip)
	if err != nil {
		return nil, err
	}
	l := lab.New(filepath.Join(dir, "plinth"), o.bin, "pb")
	defer l.Down(context.Background()) // kills the coordinators; dir goes with the scratch dir
	// Same topology as the lab and test/e2e: two controllers and a witness.
	if _, err := l.InitCoordinator(ctx, "c0", "", "127.0.0.1", base, "bench"); err != nil {
		return nil, err
	}
	if _, err := l.JoinCoordinator(ctx, "c1", "", "127.0.0.1", base+4, false); err != nil {
		return nil, err
	}
	if _, err := l.JoinCoordinator(ctx, "w", "", "127.0.0.1", base+8, true); err != nil {
		return nil, err
	}
	fmt.Printf("cluster up: c0, c1, witness w (profile %q)\n", l.Profile)

	res := &plinthResults{}
	leader, err := plinthSettled(ctx, l)
	if err != nil {
		return nil, err
	}
	admin, err := l.NodeClient(l.Coordinator(leader))
	if err != nil {
		return nil, err
	}
	// profiled runs a write window with the leader's CPU profile of it written to
	// dir/plinth-NAME-cpu.pprof when -profile asks for it.
	profiled := func(name string, run func() (writeResult, error)) (writeResult, error) {
		if !o.profile {
			return run()
		}
		path := filepath.Join(dir, "plinth-"+name+"-cpu.pprof")
		done := make(chan error, 1)
		go func() {
			time.Sleep(o.warmup)
			done <- cpuProfile(ctx, admin, path, o.duration)
		}()
		r, err := run()
		if perr := <-done; perr != nil {
			fmt.Printf("plinth %s: CPU profile: %v\n", name, perr)
		} else {
			fmt.Printf("plinth %s: leader CPU profile %s\n", name, path)
		}
		return r, err
	}
	// Token records are what `node enroll` writes: a typical small admin write.
	res.tokens, err = profiled("tokens", func() (writeResult, error) {
		return runWriters(ctx, "plinth tokens", o.writers, o.warmup, o.duration, func(ctx context.Context, w, i int) error {
			_, err := admin.Do(ctx, "POST", "/v1/tokens", wire.TokenRequest{Name: fmt.Sprintf("b%d", w), Role: pki.RoleAgent}, nil)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	report(res.tokens, "POST /v1/tokens via leader "+leader)

	agents, err := enrollAgents(ctx, l, admin, o.writers, l.Coordinator(leader))
	if err != nil {
		return nil, err
	}
	// Each writer is one agent reporting new facts for its own host: a real commit
	// every time, because the hash changes (an unchanged hash is answered without one).
	res.facts, err = profiled("facts", func() (writeResult, error) {
		return runWriters(ctx, "plinth facts", o.writers, o.warmup, o.duration, func(ctx context.Context, w, i int) error {
			facts, _ := json.Marshal(map[string]any{"seq": i, "kernel": "6.1.0-bench", "pad": strings.Repeat("x", 120)})
			_, err := agents[w].Do(ctx, "POST", "/v1/agent/facts", wire.FactsReport{Facts: facts, Hash: fmt.Sprintf("h%d-%d", w, i)}, nil)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	report(res.facts, fmt.Sprintf("POST /v1/agent/facts by %d agents via leader %s", o.writers, leader))

	res.failover, err = plinthFailover(ctx, l, o.runs)
	return res, err
}

// enrollAgents applies a site with n hosts and enrols one agent identity per host
// (token + CSR, as plinth-agent join does), returning a client per agent that talks
// to the leader.
func enrollAgents(ctx context.Context, l *lab.Lab, admin *client.Client, n int, leader *lab.Coordinator) ([]*client.Client, error) {
	var b strings.Builder
	b.WriteString(`apiVersion: plinth.dev/v1alpha1
kind: Site
metadata:
  name: bench
spec:
  controllers: [b0]
  networks:
  - name: mgmt
    role: mgmt
    cidr: 10.99.0.0/16
`)
	for i := range n {
		addr := fmt.Sprintf("10.99.%d.%d", i/200, 10+i%200)
		fmt.Fprintf(&b, `---
apiVersion: plinth.dev/v1alpha1
kind: Host
metadata:
  name: b%d
spec:
  roles: [%s]
  managementAddress: %s
  interfaces:
  - name: eth1
    addresses: [%s/16]
`, i, map[bool]string{true: "controller", false: "worker"}[i == 0], addr, addr)
	}
	if _, err := admin.Do(ctx, "POST", "/v1/apply", wire.ApplyRequest{File: "bench.yaml", YAML: b.String()}, nil); err != nil {
		return nil, fmt.Errorf("apply %d hosts: %w", n, err)
	}
	agents := make([]*client.Client, n)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cl, err := enrollAgent(ctx, admin, fmt.Sprintf("b%d", i), leader)
			mu.Lock()
			defer mu.Unlock()
			agents[i] = cl
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	fmt.Printf("applied %d hosts and enrolled %d agents\n", n, n)
	return agents, nil
}

func enrollAgent(ctx context.Context, admin *client.Client, name string, leader *lab.Coordinator) (*client.Client, error) {
	var tr wire.TokenResponse
	if _, err := admin.Do(ctx, "POST", "/v1/tokens", wire.TokenRequest{Name: name, Role: pki.RoleAgent}, &tr); err != nil {
		return nil, fmt.Errorf("token for %s: %w", name, err)
	}
	tok, err := pki.ParseToken(tr.Token)
	if err != nil {
		return nil, err
	}
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	resp, err := client.Enroll(ctx, []string{leader.JoinAddr()}, tok, key, name, nil)
	if err != nil {
		return nil, fmt.Errorf("enrol %s: %w", name, err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return nil, err
	}
	tc, err := pki.Bundle{CAPEM: []byte(resp.CA), CertPEM: []byte(resp.Cert), KeyPEM: keyPEM}.ClientTLS("")
	if err != nil {
		return nil, err
	}
	return client.New([]string{leader.APIAddr()}, tc), nil
}

// plinthFailover kills the leader runs times. The probe client is the admin's
// failover client from the identity file: it knows every coordinator.
func plinthFailover(ctx context.Context, l *lab.Lab, runs int) (failoverResult, error) {
	var res failoverResult
	cl, err := l.Client()
	if err != nil {
		return res, err
	}
	for run := range runs {
		leader, err := plinthSettled(ctx, l)
		if err != nil {
			return res, fmt.Errorf("run %d: %w", run+1, err)
		}
		c := l.Coordinator(leader)
		t0 := time.Now()
		c.Proc.Kill()
		d, err := firstAck(ctx, t0, func(ctx context.Context) error {
			_, err := cl.Do(ctx, "POST", "/v1/tokens", wire.TokenRequest{Name: "failover", Role: pki.RoleAgent}, nil)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("run %d (killed %s): %w", run+1, leader, err)
		}
		res.times = append(res.times, d)
		res.killed = append(res.killed, leader)
		fmt.Printf("failover run %2d: killed %-2s -> next acknowledged write after %s\n", run+1, leader, d.Round(time.Millisecond))
		if err := l.StartCoordinator(c); err != nil {
			return res, err
		}
		if err := l.WaitReady(ctx, c, 60*time.Second); err != nil {
			return res, err
		}
	}
	return res, nil
}

// plinthSettled waits until every coordinator is up, all name the same leader and
// have applied the same index (the restarted one caught up), and returns the
// leader. A witness that won an election hands leadership to a controller within
// seconds; it waits for that too, but accepts a witness leader after 10s.
func plinthSettled(ctx context.Context, l *lab.Lab) (string, error) {
	var leader string
	check := func(allowWitness bool) error {
		var idx uint64
		leader = ""
		for i, c := range l.Coordinators() {
			cl, err := l.NodeClient(c)
			if err != nil {
				return err
			}
			var st wire.Status
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = cl.Do(rctx, "GET", "/v1/status", nil, &st)
			cancel()
			switch {
			case err != nil:
				return fmt.Errorf("%s: %w", c.Name, err)
			case st.Leader == "" || (i > 0 && st.Leader != leader):
				return fmt.Errorf("%s: leader %q, others %q", c.Name, st.Leader, leader)
			case i > 0 && st.AppliedIndex != idx:
				return fmt.Errorf("%s: applied index %d, others %d", c.Name, st.AppliedIndex, idx)
			}
			leader, idx = st.Leader, st.AppliedIndex
		}
		if lc := l.Coordinator(leader); lc != nil && lc.Witness && !allowWitness {
			return fmt.Errorf("witness %s still leads", leader)
		}
		return nil
	}
	if err := poll(ctx, 10*time.Second, func() error { return check(false) }); err == nil {
		return leader, nil
	}
	return leader, poll(ctx, 30*time.Second, func() error { return check(true) })
}

func report(r writeResult, what string) {
	fmt.Printf("%s: %d writes in %s = %.0f/s, p50 %s p99 %s, %d errors",
		what, r.ops, r.elapsed.Round(time.Millisecond), r.perSecond(), ms(pct(r.lat, 0.5)), ms(pct(r.lat, 0.99)), r.errs)
	if r.flushN > 0 {
		fmt.Printf(", disk flush %s (%d)", msFine(r.flush), r.flushN)
	}
	if r.firstErr != nil {
		fmt.Printf(" (first: %v)", r.firstErr)
	}
	fmt.Println()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// msFine is ms with the resolution a disk flush needs.
func msFine(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// cpuProfile writes the coordinator's CPU profile of the next d to path.
func cpuProfile(ctx context.Context, cl *client.Client, path string, d time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = cl.Do(ctx, "GET", wire.ProfilePath("cpu", max(1, int(d.Seconds()))), nil, io.Writer(f))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
