package pki

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DataKeySize is the size of a data key: AES-256.
const DataKeySize = 32

// NewDataKey returns a random data key. It seals secrets at rest and must never enter
// the Raft log.
func NewDataKey() ([]byte, error) {
	k := make([]byte, DataKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("pki: new data key: %w", err)
	}
	return k, nil
}

// SaveDataKey writes key to path (base64, one line) atomically with mode 0600,
// creating the parent directory 0700 if needed. It never overwrites an existing
// file: losing a data key loses everything sealed with it.
func SaveDataKey(path string, key []byte) error {
	if len(key) != DataKeySize {
		return fmt.Errorf("pki: save data key: key is %d bytes, want %d", len(key), DataKeySize)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("pki: save data key: %w", err)
	}
	line := base64.StdEncoding.EncodeToString(key) + "\n"
	if err := writeFileExclusive(path, []byte(line), 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("pki: save data key: %s already exists, refusing to overwrite: %w", path, fs.ErrExist)
		}
		return fmt.Errorf("pki: save data key: %w", err)
	}
	return nil
}

// LoadDataKey reads a key written by SaveDataKey, refusing a file that group or
// other may access.
func LoadDataKey(path string) ([]byte, error) {
	b, err := readPrivateFile(path)
	if err != nil {
		return nil, fmt.Errorf("pki: load data key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != DataKeySize {
		// Say nothing about the content: it is the key.
		return nil, fmt.Errorf("pki: load data key %s: not a base64 %d-byte key", path, DataKeySize)
	}
	return key, nil
}

func dataAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != DataKeySize {
		return nil, fmt.Errorf("data key is %d bytes, want %d", len(key), DataKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithRandomNonce(block)
}

// Seal encrypts plaintext with AES-256-GCM under key, binding additionalData (e.g. the
// secret's name, so sealed values cannot be swapped). The result is a random 12-byte
// nonce followed by the ciphertext and tag. It is not deterministic: seal before
// proposing to Raft, never inside the FSM.
func Seal(key, plaintext, additionalData []byte) ([]byte, error) {
	aead, err := dataAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("pki: seal: %w", err)
	}
	return aead.Seal(nil, nil, plaintext, additionalData), nil
}

// Open decrypts what Seal returned, failing if the key or additionalData differ or
// sealed was altered.
func Open(key, sealed, additionalData []byte) ([]byte, error) {
	aead, err := dataAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("pki: open: %w", err)
	}
	if len(sealed) < aead.Overhead() {
		return nil, fmt.Errorf("pki: open: sealed data is %d bytes, shorter than nonce and tag", len(sealed))
	}
	pt, err := aead.Open(nil, nil, sealed, additionalData)
	if err != nil {
		return nil, fmt.Errorf("pki: open: %w", err)
	}
	return pt, nil
}
