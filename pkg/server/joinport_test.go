package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/internal/poll"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// joinServer serves a real join port on loopback with the given limits.
func joinServer(t *testing.T, lim JoinLimits) (addr string, srv *Server) {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("lab", now)
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue(pki.IssueRequest{Name: "c0", Role: pki.RoleCoordinator, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		PublicKey: key.Public(), TTL: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	srv, err = New(Config{Name: "c0", CA: ca, Bundle: pki.Bundle{CAPEM: ca.CertPEM, CertPEM: certPEM, KeyPEM: keyPEM}, Join: lim})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeJoin(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeJoin: %v", err)
		}
	})
	return ln.Addr().String(), srv
}

func joinTLS(t *testing.T, addr string) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) // the test checks timeouts, not the server's name
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// cutWithin waits until the server closes c (a read ends) and returns how long it
// took; a connection still open after limit fails the test. limit is many times
// the server's timeout: the test shows the connection is cut, not how fast.
func cutWithin(t *testing.T, c net.Conn, limit time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: still open after %v", what, limit)
	}
	took := time.Since(start)
	t.Logf("%s: cut after %v", what, took.Round(10*time.Millisecond))
	return took
}

// Slow bodies, slow headers, silent TCP clients and idle keep-alives are all cut.
func TestJoinPortTimeouts(t *testing.T) {
	addr, _ := joinServer(t, JoinLimits{HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 600 * time.Millisecond,
		WriteTimeout: time.Second, IdleTimeout: 400 * time.Millisecond})
	const limit = 15 * time.Second

	t.Run("slow body", func(t *testing.T) {
		c := joinTLS(t, addr)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: c0\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", wire.PathEnroll)
		stop := make(chan struct{})
		defer close(stop)
		go func() { // one byte every 50 ms, forever: it never finishes in time
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		cutWithin(t, c, limit, "slow body")
	})
	t.Run("slow headers", func(t *testing.T) {
		c := joinTLS(t, addr)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: c0\r\n", wire.PathHealthz)
		cutWithin(t, c, limit, "slow headers")
	})
	t.Run("no handshake", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cutWithin(t, c, limit, "silent TCP client")
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := joinTLS(t, addr)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: c0\r\n\r\n", wire.PathHealthz)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close {
			t.Fatal("the server closed after one request; the test wants a kept-alive connection")
		}
		cutWithin(t, c, limit, "idle keep-alive")
	})
}

// Connections beyond the cap are closed at once; the held ones do not stop new
// clients once they go away.
func TestJoinPortConnectionCap(t *testing.T) {
	const maxConns = 8
	addr, _ := joinServer(t, JoinLimits{HeaderTimeout: time.Minute, BodyTimeout: time.Minute, IdleTimeout: time.Minute, MaxConns: maxConns})
	var held []net.Conn
	for range maxConns {
		c := joinTLS(t, addr) // handshaken, then silent: each holds a slot
		held = append(held, c)
	}
	// The server counts a connection when it accepts it; wait until all are in.
	poll.Until(t, 10*time.Second, "a connection over the cap is closed", func() error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF || errors.Is(err, net.ErrClosed) || isReset(err) {
			return nil
		}
		return fmt.Errorf("connection %d was not closed", maxConns+1)
	})
	for _, c := range held {
		c.Close()
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	poll.Until(t, 10*time.Second, "healthz answers once the held connections are gone", func() error {
		resp, err := client.Get("https://" + addr + wire.PathHealthz)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz: %s", resp.Status)
		}
		return nil
	})
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}
