package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdResults is everything measured on etcd.
type etcdResults struct {
	put       writeResult // Put to a new key every time (like creating a token record)
	overwrite writeResult // Put to the writer's own key (like a host's facts record)
	failover  failoverResult
}

type etcdMember struct {
	name, clientURL, peerURL string
	args                     []string
	log                      string
	proc                     *proc
	id                       uint64 // raft member id, learnt from the status call
}

type etcdCluster struct {
	bin     string
	members []*etcdMember
	tls     *etcdPKI
}

// Timing flags chosen to match Plinth's "fast" profile (see printSetup).
var etcdTiming = []string{"--heartbeat-interval", "50", "--election-timeout", "500", "--pre-vote=true"}

func benchEtcd(ctx context.Context, o options, dir string) (*etcdResults, error) {
	c, err := startEtcd(ctx, o.etcd, filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, err
	}
	defer c.stop()
	leader, err := c.settled(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Println("cluster up: e0, e1, e2")
	cli, err := c.client(leader.clientURL)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	value := strings.Repeat("v", o.value)
	res := &etcdResults{}
	res.put, err = runWriters(ctx, "etcd put", o.writers, o.warmup, o.duration, func(ctx context.Context, w, i int) error {
		_, err := cli.Put(ctx, fmt.Sprintf("/tokens/w%d-%d", w, i), value)
		return err
	})
	if err != nil {
		return nil, err
	}
	report(res.put, "Put new key via leader "+leader.name)
	res.overwrite, err = runWriters(ctx, "etcd overwrite", o.writers, o.warmup, o.duration, func(ctx context.Context, w, i int) error {
		_, err := cli.Put(ctx, fmt.Sprintf("/hosts/b%d/facts", w), fmt.Sprintf("%d:%s", i, value))
		return err
	})
	if err != nil {
		return nil, err
	}
	report(res.overwrite, fmt.Sprintf("Put to %d per-writer keys via leader %s", o.writers, leader.name))
	res.failover, err = c.failover(ctx, o.runs)
	return res, err
}

func startEtcd(ctx context.Context, bin, dir string) (*etcdCluster, error) {
	base, err := freeBase(6) // 3 members x (client, peer)
	if err != nil {
		return nil, err
	}
	names := []string{"e0", "e1", "e2"}
	p, err := makeEtcdPKI(filepath.Join(dir, "tls"), names)
	if err != nil {
		return nil, err
	}
	c := &etcdCluster{bin: bin, tls: p}
	var initial []string
	for i, n := range names {
		m := &etcdMember{
			name:      n,
			clientURL: fmt.Sprintf("https://127.0.0.1:%d", base+2*i),
			peerURL:   fmt.Sprintf("https://127.0.0.1:%d", base+2*i+1),
			log:       filepath.Join(dir, "logs", n+".log"),
		}
		c.members = append(c.members, m)
		initial = append(initial, n+"="+m.peerURL)
	}
	for _, m := range c.members {
		m.args = append([]string{
			"--name", m.name, "--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
			"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
			// Ignored on restart: the member rejoins from its data dir.
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "plinth-bench",
			"--cert-file", p.certFile[m.name], "--key-file", p.keyFile[m.name],
			"--trusted-ca-file", p.caFile, "--client-cert-auth",
			"--peer-cert-file", p.certFile[m.name], "--peer-key-file", p.keyFile[m.name],
			"--peer-trusted-ca-file", p.caFile, "--peer-client-cert-auth",
			"--logger", "zap", "--log-outputs", "stderr",
		}, etcdTiming...)
		// All three start together: a new etcd cluster needs a quorum to boot.
		if m.proc, err = startProc(m.log, bin, m.args...); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *etcdCluster) stop() {
	for _, m := range c.members {
		m.proc.stop()
	}
}

func (c *etcdCluster) client(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints: endpoints, TLS: c.tls.client, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), // the client logs every retried call otherwise
	})
}

func (c *etcdCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// status asks one member for its raft view.
func (c *etcdCluster) status(ctx context.Context, cli *clientv3.Client, m *etcdMember) (*clientv3.StatusResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cli.Status(rctx, m.clientURL)
	if err == nil {
		m.id = st.Header.MemberId
	}
	return st, err
}

// settled waits until every member is up, all name the same leader and have applied
// the same index, and returns the leader (the same rule as plinthSettled).
func (c *etcdCluster) settled(ctx context.Context) (*etcdMember, error) {
	cli, err := c.client(c.endpoints()...)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var leader *etcdMember
	err = poll(ctx, 60*time.Second, func() error {
		var lid, idx uint64
		for i, m := range c.members {
			if !m.proc.alive() {
				return fmt.Errorf("etcd %s exited (log %s)", m.name, m.log)
			}
			st, err := c.status(ctx, cli, m)
			if err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			applied := st.RaftAppliedIndex
			if applied == 0 {
				applied = st.RaftIndex
			}
			switch {
			case st.Leader == 0 || (i > 0 && st.Leader != lid):
				return fmt.Errorf("%s: leader %x, others %x", m.name, st.Leader, lid)
			case i > 0 && applied != idx:
				return fmt.Errorf("%s: applied index %d, others %d", m.name, applied, idx)
			}
			lid, idx = st.Leader, applied
		}
		for _, m := range c.members {
			if m.id == lid {
				leader = m
				return nil
			}
		}
		return fmt.Errorf("leader %x is not a member we started", lid)
	})
	return leader, err
}

// failover kills the leader runs times; the probe client knows all three members,
// as an etcd user's client would.
func (c *etcdCluster) failover(ctx context.Context, runs int) (failoverResult, error) {
	var res failoverResult
	cli, err := c.client(c.endpoints()...)
	if err != nil {
		return res, err
	}
	defer cli.Close()
	for run := range runs {
		leader, err := c.settled(ctx)
		if err != nil {
			return res, fmt.Errorf("run %d: %w", run+1, err)
		}
		t0 := time.Now()
		leader.proc.kill()
		d, err := firstAck(ctx, t0, func(ctx context.Context) error {
			_, err := cli.Put(ctx, "/failover", strings.Repeat("v", 200))
			return err
		})
		if err != nil {
			return res, fmt.Errorf("run %d (killed %s): %w", run+1, leader.name, err)
		}
		res.times = append(res.times, d)
		res.killed = append(res.killed, leader.name)
		fmt.Printf("failover run %2d: killed %-2s -> next acknowledged write after %s\n", run+1, leader.name, d.Round(time.Millisecond))
		if leader.proc, err = startProc(leader.log, c.bin, leader.args...); err != nil {
			return res, err
		}
		if err := c.waitReady(ctx, cli, leader); err != nil {
			return res, err
		}
	}
	return res, nil
}

// waitReady waits until a restarted member answers and knows a leader.
func (c *etcdCluster) waitReady(ctx context.Context, cli *clientv3.Client, m *etcdMember) error {
	return poll(ctx, 60*time.Second, func() error {
		if !m.proc.alive() {
			return fmt.Errorf("etcd %s exited (log %s)", m.name, m.log)
		}
		st, err := c.status(ctx, cli, m)
		if err == nil && st.Leader == 0 {
			err = fmt.Errorf("%s: no leader yet", m.name)
		}
		return err
	})
}

// etcdVersion is the first line of `etcd --version`, for the record.
func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "etcd (version unknown: " + err.Error() + ")"
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return "etcd " + strings.TrimSpace(strings.TrimPrefix(first, "etcd Version:"))
}
