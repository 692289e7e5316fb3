package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/pki"
	"github.com/plinth-dev/plinth/pkg/state"
)

// BenchmarkAdmit is what the revocation check adds to every authenticated request:
// one read of the identity table (here with 2000 agents, each renewed once).
// go test -run - -bench Admit ./pkg/server/
func BenchmarkAdmit(b *testing.B) {
	st := state.New(slog.Default())
	now := time.Now()
	var idx uint64
	apply := func(typ string, body any) {
		data, err := state.Encode(typ, now, body)
		if err != nil {
			b.Fatal(err)
		}
		idx++
		if err, _ := st.ApplyCommand(idx, data).(error); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 2000 {
		name := fmt.Sprintf("node-%d", i)
		apply(state.CmdCreateToken, state.CreateToken{Token: state.TokenRecord{ID: name, SecretHash: "h", Name: name, Role: "agent", Expires: now.Add(time.Hour)}})
		apply(state.CmdEnroll, state.Enroll{TokenID: name, SecretHash: "h", Name: name, Role: "agent", Serial: "a" + name, NotAfter: now.Add(time.Hour)})
		apply(state.CmdRenewIdentity, state.RenewIdentity{Name: name, Role: "agent", OldSerial: "a" + name, Serial: "b" + name, NotAfter: now.Add(time.Hour)})
		apply(state.CmdConfirmIdentity, state.ConfirmIdentity{Serial: "b" + name})
	}
	s := &Server{cfg: Config{Store: st}, log: slog.Default()}
	id := pki.Identity{Name: "node-1000", Role: "agent", Serial: "bnode-1000"}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := s.admit(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
