package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Role is what kind of Plinth node a member is.
type Role string

const (
	RoleAgent       Role = "agent"
	RoleCoordinator Role = "coordinator"
)

// Timing profiles.
const (
	// ProfileLAN is memberlist.DefaultLANConfig with the probing moved onto the
	// coordinators: for real hosts on a LAN.
	ProfileLAN = "lan"
	// ProfileFast is for labs and tests: a crashed member is declared dead
	// within roughly 3-5 s.
	ProfileFast = "fast"
)

// profiles are the memberlist settings of each timing profile, by name.
// role is the member's: agents and coordinators need not pay the same.
var profiles = map[string]func(role Role) *memberlist.Config{
	ProfileLAN: func(role Role) *memberlist.Config {
		mc := memberlist.DefaultLANConfig()
		// An idle agent wakes for each probe it sends and each ping it answers, so
		// the probing moves onto the coordinators: agents probe at memberlist's
		// default 1 s, coordinators every 100 ms. A member's suspicion timer scales
		// with its own probe interval and shrinks with the others' confirmations,
		// so the coordinators' timers (what a dead host's Reachable waits for) stay
		// short. At 50 members (BenchmarkDeadDetection50, 16 kills): dead in a
		// median 3.2 s, max 5.7 s (everyone at 500 ms: 4.9 s, 5.3 s; memberlist's
		// defaults 9.0 s); an idle agent in a pool of 50 switches 18-19 times a
		// second instead of 29-31 and uses 0.16-0.20 % of a core instead of
		// 0.28-0.31 % (bench-agent). 50 ms is still far above a LAN's
		// round trip; a missed ack is retried through three peers and over TCP
		// before anyone is suspected, and the suspect refutes it.
		mc.ProbeInterval, mc.ProbeTimeout = time.Second, 500*time.Millisecond
		if role == RoleCoordinator {
			mc.ProbeInterval, mc.ProbeTimeout = 100*time.Millisecond, 50*time.Millisecond
		}
		if role == RoleAgent {
			// A gossip tick wakes an idle agent's runtime even with nothing to send:
			// every 200 ms was half its context switches. Coordinators still gossip
			// every 200 ms and suspicions also ride on probes and their acks (with
			// everyone probing every 500 ms, a dead host among 50 was found in a
			// median 4.6 s instead of 4.25 s; 2 s here: 5.0 s).
			mc.GossipInterval = time.Second
		}
		// A dead member's name may move to a new address after this long
		// (e.g. a host that came back with another IP). 0 would mean never.
		mc.DeadNodeReclaimTime = 30 * time.Second
		return mc
	},
	ProfileFast: func(Role) *memberlist.Config {
		mc := memberlist.DefaultLANConfig()
		mc.ProbeInterval = 500 * time.Millisecond
		mc.ProbeTimeout = 250 * time.Millisecond
		mc.SuspicionMult = 2
		mc.GossipInterval = 100 * time.Millisecond
		mc.PushPullInterval = 5 * time.Second
		mc.TCPTimeout = 2 * time.Second
		// Labs restart members on new ports all the time: let a dead
		// member's name move to its new address at once.
		mc.DeadNodeReclaimTime = time.Nanosecond
		return mc
	},
}

// KeySize is the required gossip key length (AES-256).
const KeySize = 32

// Config describes the local member.
type Config struct {
	Name          string // node name of this member, e.g. host name; unique in the pool
	Role          Role
	BindAddr      string // "ip:port"; port 0 picks a free one (UDP and TCP share it)
	AdvertiseAddr string // optional "ip" or "ip:port" others should use to reach us
	Key           []byte // 32-byte AES key; gossip is encrypted, plaintext is refused
	Seeds         []string
	Logger        *slog.Logger // nil means slog.Default()

	// Profile is ProfileLAN (the default when empty) or ProfileFast.
	Profile string
}

// ErrClosed is returned by operations on a closed Pool.
var ErrClosed = errors.New("membership: pool closed")

// memberlistConfig validates cfg and translates it into a memberlist config.
// The caller still has to set the delegates.
func memberlistConfig(cfg Config, logger *slog.Logger) (*memberlist.Config, error) {
	if cfg.Name == "" {
		return nil, errors.New("membership: config: name is required")
	}
	if cfg.Role != RoleAgent && cfg.Role != RoleCoordinator {
		return nil, fmt.Errorf("membership: config: role %q: want %q or %q", cfg.Role, RoleAgent, RoleCoordinator)
	}
	if len(cfg.Key) != KeySize {
		return nil, fmt.Errorf("membership: config: key is %d bytes, want %d", len(cfg.Key), KeySize)
	}

	name := cfg.Profile
	if name == "" {
		name = ProfileLAN
	}
	profile, ok := profiles[name]
	if !ok {
		return nil, fmt.Errorf("membership: config: unknown profile %q: want %q or %q", cfg.Profile, ProfileLAN, ProfileFast)
	}
	mc := profile(cfg.Role)

	bindIP, bindPort, err := splitAddr(cfg.BindAddr, true)
	if err != nil {
		return nil, fmt.Errorf("membership: config: bind address: %w", err)
	}
	if bindIP == "" {
		bindIP = "0.0.0.0"
	}
	mc.Name = cfg.Name
	mc.BindAddr = bindIP
	mc.BindPort = bindPort
	mc.AdvertiseAddr = ""
	mc.AdvertisePort = bindPort // Start sets both to the bound port when bindPort is 0
	if cfg.AdvertiseAddr != "" {
		advIP, advPort, err := splitAddr(cfg.AdvertiseAddr, false)
		if err != nil {
			return nil, fmt.Errorf("membership: config: advertise address: %w", err)
		}
		if advIP == "" {
			return nil, fmt.Errorf("membership: config: advertise address %q: ip is required", cfg.AdvertiseAddr)
		}
		mc.AdvertiseAddr = advIP
		if advPort != 0 {
			mc.AdvertisePort = advPort
		}
	}

	// Copy the key so later changes by the caller cannot reach memberlist.
	mc.SecretKey = append([]byte(nil), cfg.Key...)
	kr, err := memberlist.NewKeyring(nil, mc.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("membership: config: key: %w", err)
	}
	mc.Keyring = kr // kept by the pool so SetKeys can rotate it
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	// LZW costs a 64 KiB table per message sent, and a 20 KiB one per message
	// received, to shrink packets of a few hundred bytes on a LAN: most of an idle
	// agent's allocations. Members still read compressed messages from peers that
	// send them (an older Plinth).
	mc.EnableCompression = false

	// memberlist logs a lot; keep it at Debug so it is quiet by default.
	mc.Logger = slog.NewLogLogger(logger.With("component", "memberlist").Handler(), slog.LevelDebug)
	return mc, nil
}

// splitAddr parses "ip:port" (or "ip" when the port is optional).
func splitAddr(addr string, portRequired bool) (ip string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		if portRequired {
			return "", 0, fmt.Errorf("%q: %w", addr, err)
		}
		host, p = addr, "0"
	}
	if host != "" && net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("%q: %q is not an IP address", addr, host)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: bad port %q", addr, p)
	}
	return host, port, nil
}
