package state

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/api"
)

// marshalCommand is Encode as it was: the Command marshalled whole, the body
// compacted a second time. The test holds Encode to its bytes, and the benchmark
// measures Encode against it.
func marshalCommand(typ string, now time.Time, body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Command{Type: typ, Version: CommandVersion, Now: now.UTC(), Body: raw})
}

// factsBody is a facts report as an agent sends one: facts of a few KiB, raw.
func factsBody(b testing.TB) ReportFacts {
	b.Helper()
	facts := map[string]any{
		"hostname": "compute-0", "kernel": "6.1.0-<amd64>&co", "cpus": 64, "memoryBytes": 274877906944,
		"note": "unicode é ✓ \u2028 and \"quotes\"",
	}
	var nics []map[string]any
	for i := range 24 {
		nics = append(nics, map[string]any{"name": "ens" + string(rune('a'+i)), "mac": "52:54:00:12:34:56", "mtu": 9000, "speedMbps": 25000, "pci": "0000:3b:00.0", "driver": "mlx5_core"})
	}
	facts["nics"] = nics
	raw, err := json.MarshalIndent(facts, "", "  ") // as a client may send it
	if err != nil {
		b.Fatal(err)
	}
	return ReportFacts{Host: "compute-0", Facts: raw, Hash: "sha256:abc"}
}

func TestEncodeIsTheMarshalledCommand(t *testing.T) {
	now := time.Date(2026, 12, 6, 23, 59, 59, 123456789, time.FixedZone("x", 3600))
	bodies := map[string]any{
		CmdReportFacts:    factsBody(t),
		CmdApplyManifest:  ApplyManifest{File: "site<1>.yaml", Manifest: manifest("c0", "w1")},
		CmdNoop:           struct{}{},
		CmdSetReachable:   SetReachable{Host: "w1", Status: api.ConditionFalse, Reason: "NeverSeen", Message: "a & b <c>"},
		"Type \"quoted\"": map[string]string{"k": "\x00\u00e9"},
	}
	for typ, body := range bodies {
		got, err := Encode(typ, now, body)
		if err != nil {
			t.Fatal(err)
		}
		want, err := marshalCommand(typ, now, body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", typ, got, want)
		}
		if c, err := decodeCommand(1, got); err != nil || c.Type != typ || !c.Now.Equal(now) {
			t.Errorf("%s: decoded %+v, %v", typ, c, err)
		}
	}
	if _, err := Encode(CmdNoop, now, func() {}); err == nil {
		t.Error("a body JSON cannot hold was encoded")
	}
}

// BenchmarkEncodeFacts is Encode of a facts report against marshalling the whole
// Command (sub-benchmark "baseline"): compare the two ns/op.
func BenchmarkEncodeFacts(b *testing.B) {
	body := factsBody(b)
	now := time.Now()
	for name, enc := range map[string]func(string, time.Time, any) ([]byte, error){"encode": Encode, "baseline": marshalCommand} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc(CmdReportFacts, now, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
