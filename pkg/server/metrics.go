package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plinth-dev/plinth/pkg/consensus"
	"github.com/plinth-dev/plinth/pkg/plan"
	"github.com/plinth-dev/plinth/pkg/state"
)

// Metrics is the coordinator's Prometheus registry.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.HistogramVec
	applies  *prometheus.HistogramVec
	conns    *prometheus.CounterVec
	gossip   gossipCollector
	handler  http.Handler
}

// NewMetrics registers the coordinator's metrics, reading raft and the store at scrape time.
func NewMetrics(store *state.Store, node *consensus.Node) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "plinth_api_request_seconds", Help: "API request latency by route and status.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"route", "code"})
	m.applies = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "plinth_fsm_apply_seconds", Help: "Time to apply one command to the state machine.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 2, 16),
	}, []string{"command", "result"})
	// A connection is one TLS handshake: a rising count under steady load means
	// clients are not reusing connections, which costs the leader CPU.
	m.conns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "plinth_connections_accepted_total", Help: "TLS connections accepted, by listener (api, join).",
	}, []string{"listener"})
	m.reg.MustRegister(m.requests, m.applies, m.conns, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&stateCollector{store: store, node: node}, &m.gossip)
	store.OnApply = func(typ string, d time.Duration, err error) {
		res := "ok"
		if err != nil {
			res = "refused"
		}
		m.applies.WithLabelValues(typ, res).Observe(d.Seconds())
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *Metrics) request(route string, code int, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Observe(d.Seconds())
}

// GossipMembers is how many gossip members this coordinator sees, by role and
// state (membership.Member's); nil before its pool has started.
type GossipMembers func() map[[2]string]int

// SetGossip makes scrapes report plinth_gossip_members from members: what this
// coordinator's pool sees, so an operator can tell a host the pool lost from one it
// never saw, and a benchmark can wait for a site's gossip to settle.
func (m *Metrics) SetGossip(members GossipMembers) {
	if m == nil {
		return
	}
	m.gossip.mu.Lock()
	defer m.gossip.mu.Unlock()
	m.gossip.members = members
}

var descGossip = prometheus.NewDesc("plinth_gossip_members", "Gossip members this coordinator sees, by role and state.", []string{"role", "state"}, nil)

type gossipCollector struct {
	mu      sync.Mutex
	members GossipMembers
}

func (c *gossipCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descGossip }

func (c *gossipCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	members := c.members
	c.mu.Unlock()
	if members == nil {
		return
	}
	for k, n := range members() {
		ch <- prometheus.MustNewConstMetric(descGossip, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}

func (m *Metrics) connAccepted(listener string) {
	if m == nil {
		return
	}
	m.conns.WithLabelValues(listener).Inc()
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Metrics == nil {
		return &httpError{http.StatusNotFound, "metrics are disabled"}
	}
	s.cfg.Metrics.handler.ServeHTTP(w, r)
	return nil
}

var (
	descRaftState  = prometheus.NewDesc("plinth_raft_state", "1 for this coordinator's current raft state.", []string{"state"}, nil)
	descRaftIndex  = prometheus.NewDesc("plinth_raft_applied_index", "Last raft index applied to the state machine.", nil, nil)
	descLeader     = prometheus.NewDesc("plinth_raft_leader", "1 if this coordinator is the leader.", nil, nil)
	descSteps      = prometheus.NewDesc("plinth_steps", "Steps by state.", []string{"state"}, nil)
	descHosts      = prometheus.NewDesc("plinth_hosts", "Declared hosts by condition type and status.", []string{"condition", "status"}, nil)
	descEvents     = prometheus.NewDesc("plinth_events_total", "Events recorded since the cluster began.", nil, nil)
	descBlockCalls = prometheus.NewDesc("plinth_blocking_queries_total", "Blocking queries made (API requests with ?index= and the leader's own watches).", nil, nil)
	descBlockRuns  = prometheus.NewDesc("plinth_blocking_query_wakeups_total", "Times a waiting blocking query ran again after a change.", nil, nil)
	descBlockIdle  = prometheus.NewDesc("plinth_blocking_query_idle_wakeups_total", "Wake-ups of a blocking query that found nothing new for it.", nil, nil)
	descLogBytes   = prometheus.NewDesc("plinth_raft_log_bytes_written_total", "Bytes of encoded entries this coordinator appended to its Raft log since it started.", nil, nil)
)

type stateCollector struct {
	store *state.Store
	node  *consensus.Node
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descRaftIndex, descLeader, descSteps, descHosts, descEvents, descBlockCalls, descBlockRuns, descBlockIdle, descLogBytes} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.node != nil {
		for _, st := range []string{"Leader", "Follower", "Candidate", "Shutdown"} {
			v := 0.0
			if c.node.State() == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descRaftState, prometheus.GaugeValue, v, st)
		}
		l := 0.0
		if c.node.IsLeader() {
			l = 1
		}
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, l)
		ch <- prometheus.MustNewConstMetric(descLogBytes, prometheus.CounterValue, float64(c.node.LogBytesWritten()))
	}
	bs := c.store.BlockStats()
	ch <- prometheus.MustNewConstMetric(descBlockCalls, prometheus.CounterValue, float64(bs.Calls))
	ch <- prometheus.MustNewConstMetric(descBlockRuns, prometheus.CounterValue, float64(bs.Wakeups))
	ch <- prometheus.MustNewConstMetric(descBlockIdle, prometheus.CounterValue, float64(bs.Idle))
	c.store.Read(func(v state.View) {
		ch <- prometheus.MustNewConstMetric(descRaftIndex, prometheus.GaugeValue, float64(v.Index()))
		steps := v.StepCounts()
		for _, st := range []string{"Pending", "Ready", "Running", "Succeeded", "Failed", "Blocked"} {
			ch <- prometheus.MustNewConstMetric(descSteps, prometheus.GaugeValue, float64(steps[plan.State(st)]), st)
		}
		hosts := v.HostConditionCounts()
		for k, n := range hosts {
			ch <- prometheus.MustNewConstMetric(descHosts, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
		evs := v.Events(0)
		var last uint64
		if len(evs) > 0 {
			last = evs[len(evs)-1].ID
		}
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(last))
	})
}
