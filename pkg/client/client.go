// Package client talks to the coordinators' HTTPS API with an mTLS identity. It is
// shared by the operator CLI and the agent.
//
// It owns failover between coordinator addresses and the decoding of API errors. It
// must never retry a request that may have been applied unless the caller says so.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/wire"
)

// Client calls the coordinator API.
type Client struct {
	mu    sync.Mutex
	addrs []string
	next  int
	hc    *http.Client
}

// New returns a client for the given coordinator API addresses ("host:port").
func New(addrs []string, tc *tls.Config) *Client { return NewFrom(addrs, tc, nil) }

// NewFrom is New with connections made from the local address src (nil: the
// kernel's choice).
func NewFrom(addrs []string, tc *tls.Config, src net.IP) *Client {
	d := &net.Dialer{Timeout: 3 * time.Second}
	if src != nil {
		d.LocalAddr = &net.TCPAddr{IP: src}
	}
	return &Client{
		addrs: append([]string(nil), addrs...),
		hc: &http.Client{Transport: &http.Transport{
			TLSClientConfig: tc,
			// Coordinators speak HTTP/2 (older ones HTTP/1.1): one connection carries
			// all of a caller's requests. A request that times out leaves it open, so
			// it is pinged once quiet for pingAfter and dropped when a ping goes
			// unanswered for pingTimeout: a coordinator cut off by a partition is
			// left for the next, not waited on by every request after.
			ForceAttemptHTTP2: true,
			HTTP2:             &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: pingTimeout},
			// For HTTP/1.1: above what one caller has in flight at once, an agent's
			// blocking query and the reports of its 3 + 8 step runs (pkg/agent).
			MaxIdleConnsPerHost: 16,
			DialContext:         d.DialContext,
			TLSHandshakeTimeout: 5 * time.Second,
		}},
	}
}

// The HTTP/2 health check: a connection with nothing received for pingAfter is
// pinged, and closed if no answer comes within pingTimeout. An idle agent's blocking
// query is such a connection: one ping and its answer every pingAfter.
const (
	pingAfter   = 15 * time.Second
	pingTimeout = 5 * time.Second
)

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }

// FromIdentityFile builds a client from an identity file written by `init`.
func FromIdentityFile(path string) (*Client, error) {
	f, err := pki.ReadIdentityFile(path)
	if err != nil {
		return nil, err
	}
	b := pki.Bundle{CAPEM: []byte(f.CA), CertPEM: []byte(f.Cert), KeyPEM: []byte(f.Key)}
	tc, err := b.ClientTLSVerify("", pki.RequireRole(pki.RoleCoordinator))
	if err != nil {
		return nil, err
	}
	if len(f.Coordinators) == 0 {
		return nil, fmt.Errorf("client: identity file %s lists no coordinators", path)
	}
	return New(f.Coordinators, tc), nil
}

// SetAddrs replaces the coordinator addresses (e.g. after learning new members).
func (c *Client) SetAddrs(addrs []string) {
	if len(addrs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addrs = append([]string(nil), addrs...)
	c.next = 0
}

// Addrs returns the coordinator addresses in use.
func (c *Client) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.addrs...)
}

// Error is an error answered by the API.
type Error struct {
	Status int
	Msg    string
	Fields []api.FieldError
	Addr   string
}

func (e *Error) Error() string {
	if len(e.Fields) > 0 {
		return api.ErrorList(e.Fields).Error()
	}
	return e.Msg
}

// StatusOf returns the HTTP status of an API error, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Do sends a request, failing over to the next coordinator when one cannot be
// reached or has no leader (503). It returns the X-Plinth-Index of the answer.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) (uint64, error) {
	var body []byte
	if in != nil {
		if raw, ok := in.([]byte); ok {
			body = raw
		} else {
			b, err := json.Marshal(in)
			if err != nil {
				return 0, fmt.Errorf("client: encode %s %s: %w", method, path, err)
			}
			body = b
		}
	}
	addrs := c.Addrs()
	c.mu.Lock()
	start := c.next
	c.mu.Unlock()
	var lastErr error
	for i := range addrs {
		addr := addrs[(start+i)%len(addrs)]
		idx, err := c.once(ctx, addr, method, path, body, out)
		if err == nil {
			c.mu.Lock()
			c.next = (start + i) % len(addrs)
			c.mu.Unlock()
			return idx, nil
		}
		lastErr = err
		var pw *partialWriteError
		if ctx.Err() != nil || errors.As(err, &pw) {
			return 0, lastErr
		}
		var ae *Error
		if errors.As(err, &ae) && ae.Status != http.StatusServiceUnavailable {
			return 0, err
		}
	}
	return 0, lastErr
}

func (c *Client) once(ctx context.Context, addr, method, path string, body []byte, out any) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("coordinator %s: %w", addr, err)
	}
	defer resp.Body.Close()
	idx, _ := strconv.ParseUint(resp.Header.Get("X-Plinth-Index"), 10, 64)
	if resp.StatusCode != http.StatusOK {
		var eb wire.ErrorBody
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(raw, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(raw))
		}
		return 0, &Error{Status: resp.StatusCode, Msg: eb.Error, Fields: eb.Fields, Addr: addr}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return idx, nil
	}
	if w, ok := out.(io.Writer); ok {
		cw := &countingWriter{w: w}
		if _, err := io.Copy(cw, resp.Body); err != nil {
			err = fmt.Errorf("coordinator %s: read %s: %w", addr, path, err)
			if cw.n > 0 {
				return 0, &partialWriteError{err}
			}
			return 0, err
		}
		return idx, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return 0, fmt.Errorf("coordinator %s: decode %s: %w", addr, path, err)
	}
	// The decoder stops at the end of the value: the rest (the encoder's newline,
	// a chunked body's last chunk) is read so the connection is kept, not closed.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	return idx, nil
}

// drainLimit bounds what is read past a decoded answer to keep its connection.
const drainLimit = 64 << 10

// partialWriteError is a failure after part of a response body reached the caller's
// io.Writer: asking another coordinator would append a second body to the first (a
// `snapshot save` file that is half one copy and then another), so Do stops there.
type partialWriteError struct{ err error }

func (e *partialWriteError) Error() string {
	return e.err.Error() + " (after part of the body was written)"
}
func (e *partialWriteError) Unwrap() error { return e.err }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Blocking appends Consul-style blocking parameters to a path.
func Blocking(path string, index uint64, wait time.Duration) string {
	if index == 0 {
		return path
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "index=" + strconv.FormatUint(index, 10) + "&wait=" + url.QueryEscape(wait.String())
}
