package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// tokenPrefix marks a printed token and its format version.
const tokenPrefix = "plinth1."

// maxTokenLen bounds what ParseToken will decode.
const maxTokenLen = 2048

// Token parse errors, for errors.Is.
var (
	ErrTokenMalformed = errors.New("pki: token is malformed")
	ErrNotToken       = errors.New("pki: not a plinth token")
)

// Token lets one host join once before Expires: it names the host and role the
// certificate will be issued for and the CA fingerprint the host must pin. Secret is
// what proves possession; the coordinator stores only SecretHash (see Record).
type Token struct {
	ID            string
	Secret        string
	Name          string
	Role          string
	CAFingerprint string
	Expires       time.Time
}

// tokenWire is the token's encoded form.
type tokenWire struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	FP     string `json:"fp"`
	Exp    int64  `json:"exp"`
}

// NewToken makes a token for host (or user) name with role, pinning caFingerprint,
// valid until expires (kept to whole seconds).
func NewToken(name, role, caFingerprint string, expires time.Time) (Token, error) {
	if expires.IsZero() {
		return Token{}, fmt.Errorf("pki: new token: expiry is zero")
	}
	var id [8]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Token{}, fmt.Errorf("pki: new token: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return Token{}, fmt.Errorf("pki: new token: %w", err)
	}
	t := Token{
		ID:            hex.EncodeToString(id[:]),
		Secret:        base64.RawURLEncoding.EncodeToString(secret[:]),
		Name:          name,
		Role:          role,
		CAFingerprint: strings.ToLower(caFingerprint),
		Expires:       time.Unix(expires.Unix(), 0).UTC(),
	}
	if err := t.validate(); err != nil {
		return Token{}, fmt.Errorf("pki: new token: %w", err)
	}
	return t, nil
}

func (t Token) validate() error {
	if b, err := hex.DecodeString(t.ID); err != nil || len(b) != 8 || t.ID != strings.ToLower(t.ID) {
		return fmt.Errorf("id %q is not 16 lowercase hex digits", t.ID)
	}
	if b, err := base64.RawURLEncoding.DecodeString(t.Secret); err != nil || len(b) != 32 {
		return fmt.Errorf("secret is not 32 bytes of base64url")
	}
	if err := checkName(t.Name); err != nil {
		return err
	}
	if err := checkRole(t.Role); err != nil {
		return err
	}
	if err := checkFingerprintSyntax(t.CAFingerprint); err != nil {
		return err
	}
	if t.Expires.Unix() <= 0 {
		return fmt.Errorf("expiry %v is not after 1970", t.Expires)
	}
	return nil
}

// String is the printable token, "plinth1.<base64url JSON>". It contains the secret:
// show it to the operator once and never log it (Token's LogValue and GoString omit it).
func (t Token) String() string {
	b, err := json.Marshal(tokenWire{ID: t.ID, Secret: t.Secret, Name: t.Name, Role: t.Role, FP: t.CAFingerprint, Exp: t.Expires.Unix()})
	if err != nil {
		return "" // unreachable: the wire form has only strings and an int
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseToken reads what String printed; surrounding white space is ignored. Errors
// wrap ErrNotToken or ErrTokenMalformed and never contain the secret.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	body, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		if strings.HasPrefix(s, "plinth") && strings.Contains(s, ".") {
			return Token{}, fmt.Errorf("%w: unsupported version %q", ErrNotToken, s[:strings.Index(s, ".")])
		}
		return Token{}, ErrNotToken
	}
	if len(s) > maxTokenLen {
		return Token{}, fmt.Errorf("%w: longer than %d characters", ErrTokenMalformed, maxTokenLen)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return Token{}, fmt.Errorf("%w: not base64url", ErrTokenMalformed)
	}
	var w tokenWire
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || dec.More() {
		return Token{}, fmt.Errorf("%w: bad payload", ErrTokenMalformed)
	}
	t := Token{ID: w.ID, Secret: w.Secret, Name: w.Name, Role: w.Role, CAFingerprint: w.FP, Expires: time.Unix(w.Exp, 0).UTC()}
	if err := t.validate(); err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrTokenMalformed, err)
	}
	return t, nil
}

// Expired reports whether the token is no longer valid at now.
func (t Token) Expired(now time.Time) bool { return !now.Before(t.Expires) }

// SecretHash is the hex SHA-256 of the secret: what the coordinator stores.
func (t Token) SecretHash() string { return hashSecret(t.Secret) }

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// VerifySecret reports, in constant time, whether secret hashes to hash.
func VerifySecret(hash, secret string) bool {
	return subtle.ConstantTimeCompare([]byte(strings.ToLower(hash)), []byte(hashSecret(secret))) == 1
}

// LogValue logs the token without its secret.
func (t Token) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", t.ID), slog.String("name", t.Name), slog.String("role", t.Role),
		slog.Time("expires", t.Expires))
}

// GoString keeps %#v from printing the secret.
func (t Token) GoString() string {
	return fmt.Sprintf("pki.Token{ID:%q, Name:%q, Role:%q, Expires:%s}", t.ID, t.Name, t.Role, t.Expires.Format(time.RFC3339))
}

// TokenRecord is what the coordinator keeps for an outstanding token (e.g. in the
// Raft state): everything but the secret. Marking it used is the coordinator's job.
type TokenRecord struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Role       string    `json:"role"`
	SecretHash string    `json:"secretHash"`
	Expires    time.Time `json:"expires"`
}

// Record is the token's TokenRecord.
func (t Token) Record() TokenRecord {
	return TokenRecord{ID: t.ID, Name: t.Name, Role: t.Role, SecretHash: t.SecretHash(), Expires: t.Expires}
}

// Verify checks a presented token against the record at now: same ID, matching
// secret, same name and role, not expired. Name, role and expiry come from the
// record, not from what the token claims.
func (r TokenRecord) Verify(t Token, now time.Time) error {
	if t.ID != r.ID {
		return fmt.Errorf("pki: token %s does not match record %s", t.ID, r.ID)
	}
	if !VerifySecret(r.SecretHash, t.Secret) {
		return fmt.Errorf("pki: token %s: wrong secret", r.ID)
	}
	if t.Name != r.Name || t.Role != r.Role {
		return fmt.Errorf("pki: token %s was issued for %s %q, not %s %q", r.ID, r.Role, r.Name, t.Role, t.Name)
	}
	if !now.Before(r.Expires) {
		return fmt.Errorf("pki: token %s expired at %s", r.ID, r.Expires.UTC().Format(time.RFC3339))
	}
	return nil
}
