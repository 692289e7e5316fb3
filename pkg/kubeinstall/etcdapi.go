package kubeinstall

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// etcdClient speaks etcd's v3 JSON gateway over mutual TLS: enough for health,
// membership and (in tests) a write, without the etcd client module.
type etcdClient struct {
	hc *http.Client
}

func newEtcdClient(caPEM, certPEM, keyPEM []byte) (*etcdClient, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("etcd CA: no certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	return &etcdClient{hc: &http.Client{Transport: tr, Timeout: 5 * time.Second}}, nil
}

// etcdMemberInfo is one entry of member/list. Name and ClientURLs stay empty until
// the member has started and published them.
type etcdMemberInfo struct {
	ID         string   `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
}

func (c *etcdClient) call(ctx context.Context, endpoint, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s%s: %s: %s", endpoint, path, resp.Status, bytes.TrimSpace(raw))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("etcd %s%s: decode: %w", endpoint, path, err)
	}
	return nil
}

// members lists the cluster's members as endpoint sees them.
func (c *etcdClient) members(ctx context.Context, endpoint string) ([]etcdMemberInfo, error) {
	var out struct {
		Members []etcdMemberInfo `json:"members"`
	}
	err := c.call(ctx, endpoint, "/v3/cluster/member/list", struct{}{}, &out)
	return out.Members, err
}

// hasLeader reports whether endpoint knows a leader, i.e. the cluster is running.
func (c *etcdClient) hasLeader(ctx context.Context, endpoint string) (bool, error) {
	var out struct {
		Leader string `json:"leader"`
	}
	if err := c.call(ctx, endpoint, "/v3/maintenance/status", struct{}{}, &out); err != nil {
		return false, err
	}
	return out.Leader != "" && out.Leader != "0", nil
}

// addMember adds a member by its peer URL.
func (c *etcdClient) addMember(ctx context.Context, endpoint, peerURL string) error {
	return c.call(ctx, endpoint, "/v3/cluster/member/add", map[string]any{"peerURLs": []string{peerURL}}, nil)
}

// healthy asks one member whether it serves with a quorum.
func (c *etcdClient) healthy(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&h)
	if resp.StatusCode != http.StatusOK || h.Health != "true" {
		return fmt.Errorf("etcd %s: not healthy (%s) %s", endpoint, resp.Status, h.Reason)
	}
	return nil
}

// put writes key=value (tests use it to prove the cluster takes writes).
func (c *etcdClient) put(ctx context.Context, endpoint, key, value string) error {
	return c.call(ctx, endpoint, "/v3/kv/put", map[string][]byte{"key": []byte(key), "value": []byte(value)}, nil)
}
