package coordinator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/kubeinstall/certs"
	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/secretref"
	"github.com/plinth-dev/plinth/pkg/state"
)

// Secrets the leader generates on demand: a step input secretref.GeneratedRef(kind, id)
// makes the leader create that secret (random, sealed, then proposed) the first time it
// sees the reference. The kinds say what shape the value takes.
var generators = map[string]func() (string, error){
	// hex32: 32 random bytes as 64 hex digits (e.g. kubeadm's certificate key).
	secretref.GenHex32: func() (string, error) { return randomHex(32) },
	// bootstrap-token: kubeadm's "[a-z0-9]{6}.[a-z0-9]{16}".
	secretref.GenBootstrapToken: func() (string, error) {
		id, err := randomAlnum(6)
		if err != nil {
			return "", err
		}
		sec, err := randomAlnum(16)
		return id + "." + sec, err
	},
	// password: 24 random characters of [a-z0-9].
	secretref.GenPassword: func() (string, error) { return randomAlnum(24) },
	// etcd-ca: a self-signed ECDSA CA for Plinth's etcd, certificate and key PEM.
	secretref.GenEtcdCA: func() (string, error) { return certs.NewCA("etcd-ca", time.Now()) },
}

// anyRef finds secret references in a step's JSON inputs (names are [A-Za-z0-9._/-]).
var refPrefix = []byte(secretref.Prefix)

var anyRef = regexp.MustCompile(regexp.QuoteMeta(secretref.Prefix) + `([A-Za-z0-9._/-]+)`)

// ensureGeneratedSecrets creates every generated secret that some step references
// and that does not exist yet.
func (d *daemon) ensureGeneratedSecrets(ctx context.Context) error {
	want := map[string]string{}
	d.store.Read(func(v state.View) {
		v.EachStepInputs(func(_ string, inputs []byte) {
			if !bytes.Contains(inputs, refPrefix) {
				return
			}
			for _, m := range anyRef.FindAllSubmatch(inputs, -1) {
				name := string(m[1])
				kind, _, ok := secretref.ParseGenerated(name)
				if _, have := v.Secret(name); ok && !have {
					want[name] = kind
				}
			}
		})
		for _, name := range appPasswords(v) {
			kind, _, ok := secretref.ParseGenerated(name)
			if _, have := v.Secret(name); ok && !have {
				want[name] = kind
			}
		}
	})
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		gen, ok := generators[want[name]]
		if !ok {
			return fmt.Errorf("secret %s: unknown generated kind %q (known: %s)", name, want[name], strings.Join(generatorKinds(), ", "))
		}
		val, err := gen()
		if err != nil {
			return err
		}
		sealed, err := pki.Seal(d.dataKey, []byte(val), []byte(name))
		if err != nil {
			return err
		}
		if err := d.propose(ctx, state.CmdPutSecret, state.PutSecret{Secret: state.SecretRecord{Name: name, Ciphertext: sealed}}); err != nil {
			return err
		}
		d.log.Info("generated secret", "name", name)
	}
	return nil
}

func generatorKinds() []string {
	out := make([]string, 0, len(generators))
	for k := range generators {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func randomAlnum(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		b[i] = alphabet[k.Int64()]
	}
	return string(b), nil
}
