package pki

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func newTestToken(t *testing.T) Token {
	t.Helper()
	ca := newTestCA(t, "lab", testNow)
	tok, err := NewToken("compute-7", RoleAgent, ca.Fingerprint(), testNow.Add(time.Hour+500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// rewrite decodes a printed token, lets edit change its payload and re-encodes it.
func rewrite(t *testing.T, s string, edit func(map[string]any)) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, tokenPrefix))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	raw, _ = json.Marshal(m)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

func TestTokenRoundTrip(t *testing.T) {
	tok := newTestToken(t)
	if len(tok.ID) != 16 || len(tok.Secret) != 43 || !tok.Expires.Equal(testNow.Add(time.Hour)) {
		t.Errorf("token %#v, secret length %d", tok, len(tok.Secret))
	}
	s := tok.String()
	if !strings.HasPrefix(s, "plinth1.") || strings.ContainsAny(s, " \n+/=") {
		t.Errorf("printed form %q", s)
	}
	got, err := ParseToken("  " + s + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if got != tok {
		t.Errorf("round trip: got %#v, want %#v", got, tok)
	}
	other := newTestToken(t)
	if other.ID == tok.ID || other.Secret == tok.Secret {
		t.Error("tokens repeat")
	}
}

func TestTokenExpired(t *testing.T) {
	tok := newTestToken(t)
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{{testNow, false}, {tok.Expires.Add(-time.Second), false}, {tok.Expires, true}, {tok.Expires.Add(time.Hour), true}} {
		if got := tok.Expired(tc.now); got != tc.want {
			t.Errorf("Expired(%v) = %v", tc.now, got)
		}
	}
}

func TestParseTokenErrors(t *testing.T) {
	s := newTestToken(t).String()
	for name, tc := range map[string]struct {
		in   string
		want error
	}{
		"empty":         {"", ErrNotToken},
		"other string":  {"hello world", ErrNotToken},
		"other version": {"plinth2." + s[len(tokenPrefix):], ErrNotToken},
		"truncated":     {s[:len(s)-10], ErrTokenMalformed},
		"bad base64":    {s[:20] + "!" + s[21:], ErrTokenMalformed},
		"not json":      {tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte("{nope")), ErrTokenMalformed},
		"trailing json": {tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(`{"id":"x"} {}`)), ErrTokenMalformed},
		"extra field":   {rewrite(t, s, func(m map[string]any) { m["admin"] = true }), ErrTokenMalformed},
		"bad role":      {rewrite(t, s, func(m map[string]any) { m["role"] = "root" }), ErrTokenMalformed},
		"bad name":      {rewrite(t, s, func(m map[string]any) { m["name"] = "a b" }), ErrTokenMalformed},
		"short secret":  {rewrite(t, s, func(m map[string]any) { m["secret"] = "abc" }), ErrTokenMalformed},
		"bad id":        {rewrite(t, s, func(m map[string]any) { m["id"] = "XYZ" }), ErrTokenMalformed},
		"bad fp":        {rewrite(t, s, func(m map[string]any) { m["fp"] = "sha1:00" }), ErrTokenMalformed},
		"no expiry":     {rewrite(t, s, func(m map[string]any) { delete(m, "exp") }), ErrTokenMalformed},
		"huge":          {tokenPrefix + strings.Repeat("A", 4096), ErrTokenMalformed},
	} {
		_, err := ParseToken(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", name, err, tc.want)
		}
	}
	// Errors never echo the secret.
	tok := newTestToken(t)
	_, err := ParseToken(rewrite(t, tok.String(), func(m map[string]any) { m["role"] = "root" }))
	if err == nil || strings.Contains(err.Error(), tok.Secret) {
		t.Errorf("error %v", err)
	}
}

func TestTokenVerify(t *testing.T) {
	tok := newTestToken(t)
	rec := tok.Record()
	if rec.SecretHash != tok.SecretHash() || len(rec.SecretHash) != 64 || strings.Contains(rec.SecretHash, tok.Secret) {
		t.Fatalf("record %+v", rec)
	}
	if !VerifySecret(rec.SecretHash, tok.Secret) || VerifySecret(rec.SecretHash, tok.Secret+"x") || VerifySecret("", tok.Secret) {
		t.Error("VerifySecret")
	}
	parsed, err := ParseToken(tok.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Verify(parsed, testNow); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := rec.Verify(parsed, rec.Expires); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}

	// Tampering that still parses is caught by verification against the record.
	other := newTestToken(t)
	for name, edit := range map[string]func(map[string]any){
		"name":   func(m map[string]any) { m["name"] = "ctl-1" },
		"role":   func(m map[string]any) { m["role"] = RoleCoordinator },
		"secret": func(m map[string]any) { m["secret"] = other.Secret },
		"id":     func(m map[string]any) { m["id"] = other.ID },
		"expiry": func(m map[string]any) { m["exp"] = testNow.Add(time.Hour * 1000).Unix() }, // parses, but the record decides
	} {
		tampered, err := ParseToken(rewrite(t, tok.String(), edit))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err = rec.Verify(tampered, rec.Expires.Add(time.Minute))
		if err == nil {
			t.Errorf("tampered %s verified", name)
		} else if strings.Contains(err.Error(), tok.Secret) || strings.Contains(err.Error(), other.Secret) {
			t.Errorf("error leaks a secret: %v", err)
		}
	}
}

func TestNewTokenValidates(t *testing.T) {
	fp := newTestCA(t, "lab", testNow).Fingerprint()
	for name, call := range map[string]func() (Token, error){
		"role":   func() (Token, error) { return NewToken("h", "root", fp, testNow) },
		"name":   func() (Token, error) { return NewToken("", RoleAgent, fp, testNow) },
		"fp":     func() (Token, error) { return NewToken("h", RoleAgent, "abc", testNow) },
		"expiry": func() (Token, error) { return NewToken("h", RoleAgent, fp, time.Time{}) },
	} {
		if _, err := call(); err == nil {
			t.Errorf("bad %s accepted", name)
		}
	}
}

func TestTokenNotLogged(t *testing.T) {
	tok := newTestToken(t)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("issued", "token", tok)
	for _, s := range []string{buf.String(), fmt.Sprintf("%#v", tok), tok.GoString()} {
		if strings.Contains(s, tok.Secret) || !strings.Contains(s, tok.ID) {
			t.Errorf("leaks the secret or lacks the id: %s", s)
		}
	}
}
