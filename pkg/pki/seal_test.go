package pki

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	key, err := NewDataKey()
	if err != nil || len(key) != 32 {
		t.Fatalf("NewDataKey: %d bytes, %v", len(key), err)
	}
	pt := []byte("ceph admin keyring")
	ad := []byte("secret/ceph-admin")
	sealed, err := Seal(key, pt, ad)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != 12+len(pt)+16 || bytes.Contains(sealed, pt) {
		t.Errorf("sealed form: %d bytes", len(sealed))
	}
	got, err := Open(key, sealed, ad)
	if err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Open: %q, %v", got, err)
	}
	again, _ := Seal(key, pt, ad)
	if bytes.Equal(again, sealed) {
		t.Error("two seals are identical: nonce not random")
	}
	if got, err := Open(key, mustSeal(t, key, nil, nil), nil); err != nil || len(got) != 0 {
		t.Errorf("empty plaintext: %q %v", got, err)
	}

	// Any flipped bit (nonce, ciphertext or tag) is detected.
	for i := range sealed {
		tampered := bytes.Clone(sealed)
		tampered[i] ^= 0x80
		if _, err := Open(key, tampered, ad); err == nil {
			t.Fatalf("tampered byte %d accepted", i)
		}
	}
	if _, err := Open(key, sealed, []byte("secret/other")); err == nil {
		t.Error("wrong additional data accepted")
	}
	if _, err := Open(key, sealed, nil); err == nil {
		t.Error("missing additional data accepted")
	}
	other, _ := NewDataKey()
	if _, err := Open(other, sealed, ad); err == nil {
		t.Error("wrong key accepted")
	}
	for _, short := range [][]byte{nil, sealed[:11], sealed[:27]} {
		if _, err := Open(key, short, ad); err == nil {
			t.Errorf("%d-byte input accepted", len(short))
		}
	}
	if _, err := Seal(key[:16], pt, ad); err == nil {
		t.Error("16-byte key accepted")
	}
	if _, err := Open(key[:31], sealed, ad); err == nil {
		t.Error("31-byte key accepted")
	}
}

func mustSeal(t *testing.T, key, pt, ad []byte) []byte {
	t.Helper()
	s, err := Seal(key, pt, ad)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDataKeyFile(t *testing.T) {
	key, _ := NewDataKey()
	path := filepath.Join(t.TempDir(), "var", "lib", "plinth", "data.key")
	if err := SaveDataKey(path, key); err != nil {
		t.Fatal(err)
	}
	checkMode(t, path, 0o600)
	checkMode(t, filepath.Dir(path), 0o700)
	checkNoTemps(t, filepath.Dir(path))
	got, err := LoadDataKey(path)
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("LoadDataKey: %v", err)
	}

	other, _ := NewDataKey()
	if err := SaveDataKey(path, other); !errors.Is(err, fs.ErrExist) {
		t.Errorf("overwrite: %v", err)
	}
	if got, _ := LoadDataKey(path); !bytes.Equal(got, key) {
		t.Error("data key was overwritten")
	}
	if err := SaveDataKey(path+"2", key[:16]); err == nil {
		t.Error("short key saved")
	}

	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadDataKey(path); err == nil || !strings.Contains(err.Error(), "permissions") {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("c2VjcmV0LWJ1dC1zaG9ydA==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDataKey(bad); err == nil || strings.Contains(err.Error(), "c2VjcmV0") {
		t.Errorf("short key file: %v", err)
	}
	if _, err := LoadDataKey(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}
