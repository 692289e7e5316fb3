package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// etcdPKI is a throwaway CA and the certificates etcd needs for mutual TLS, with
// the same key type Plinth uses (ECDSA P-256), so the two pay similar TLS costs.
type etcdPKI struct {
	caFile string
	// Per member: one certificate for both its client and peer listeners, valid for
	// server and client auth (a member dials its peers with it).
	certFile, keyFile map[string]string
	client            *tls.Config
}

func makeEtcdPKI(dir string, members []string) (*etcdPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench etcd CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := &etcdPKI{caFile: filepath.Join(dir, "ca.pem"), certFile: map[string]string{}, keyFile: map[string]string{}}
	if err := writePEM(p.caFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	issue := func(serial int64, cn string) ([]byte, *ecdsa.PrivateKey, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		return der, key, err
	}
	for i, m := range members {
		der, key, err := issue(int64(i+2), m)
		if err != nil {
			return nil, err
		}
		p.certFile[m], p.keyFile[m] = filepath.Join(dir, m+".pem"), filepath.Join(dir, m+"-key.pem")
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := writePEM(p.certFile[m], "CERTIFICATE", der); err != nil {
			return nil, err
		}
		if err := writePEM(p.keyFile[m], "EC PRIVATE KEY", kder); err != nil {
			return nil, err
		}
	}
	der, key, err := issue(100, "bench-client")
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	p.client = &tls.Config{
		RootCAs:      roots,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS13, // as Plinth; etcd 3.4 (Go 1.19) speaks it
	}
	return p, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
