package pki

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// IdentityFile is the CLI's credential: the site CA, an admin certificate and key,
// and the coordinator API addresses, in one JSON file (which is also valid YAML)
// written 0600. Key is secret; IdentityFile's String never shows it.
type IdentityFile struct {
	Coordinators []string `json:"coordinators"`
	CA           string   `json:"ca"`
	Cert         string   `json:"cert"`
	Key          string   `json:"key"`
}

// NewIdentityFile combines coordinator addresses (host:port) and a bundle.
func NewIdentityFile(coordinators []string, b Bundle) IdentityFile {
	return IdentityFile{Coordinators: coordinators, CA: string(b.CAPEM), Cert: string(b.CertPEM), Key: string(b.KeyPEM)}
}

// Bundle is the file's CA, certificate and key.
func (f IdentityFile) Bundle() Bundle {
	return Bundle{CAPEM: []byte(f.CA), CertPEM: []byte(f.Cert), KeyPEM: []byte(f.Key)}
}

// String describes the file without its key.
func (f IdentityFile) String() string {
	return fmt.Sprintf("pki.IdentityFile(%s, coordinators %v)", f.Bundle(), f.Coordinators)
}

// GoString keeps %#v from printing the key.
func (f IdentityFile) GoString() string { return f.String() }

func (f IdentityFile) validate() error {
	if len(f.Coordinators) == 0 {
		return fmt.Errorf("no coordinator addresses")
	}
	for _, c := range f.Coordinators {
		if c == "" {
			return fmt.Errorf("empty coordinator address")
		}
	}
	_, err := f.Bundle().parse()
	return err
}

// Write validates f and writes it to path atomically with mode 0600, creating the
// parent directory 0700 if needed. An existing file is replaced.
func (f IdentityFile) Write(path string) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("pki: write identity file %s: %w", path, err)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("pki: write identity file %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("pki: write identity file: %w", err)
	}
	if err := writeFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("pki: write identity file: %w", err)
	}
	return nil
}

// ReadIdentityFile reads and validates an identity file. Like ssh, it refuses a file
// that group or other may access.
func ReadIdentityFile(path string) (IdentityFile, error) {
	b, err := readPrivateFile(path)
	if err != nil {
		return IdentityFile{}, fmt.Errorf("pki: identity file: %w", err)
	}
	var f IdentityFile
	if err := json.Unmarshal(b, &f); err != nil {
		return IdentityFile{}, fmt.Errorf("pki: identity file %s: %w", path, err)
	}
	if err := f.validate(); err != nil {
		return IdentityFile{}, fmt.Errorf("pki: identity file %s: %w", path, err)
	}
	return f, nil
}
