package driverexec

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// The test binary is its own drivers program: with childEnv set, TestMain serves
// the operation in its last argument with fileDriver, as plinth-drivers would.
const childEnv = "PLINTH_DRIVEREXEC_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

func child(mode string) int {
	ctx := context.Background()
	op := os.Args[len(os.Args)-1]
	switch mode {
	case "crash":
		if op != OpHello {
			fmt.Fprintln(os.Stderr, `{"level":"INFO","msg":"starting"}`)
			panic("driver library blew up in a goroutine")
		}
	case "old":
		fmt.Println(`{"protocol":0,"kinds":["test.file"]}`)
		return 0
	case "procs":
		fmt.Fprintf(os.Stderr, "%s on %d CPUs\n", op, runtime.GOMAXPROCS(0))
	case "slow":
		if op == OpRun {
			// Stands for a driver that honours cancellation: exits on SIGTERM.
			time.Sleep(time.Minute)
			return 3
		}
	case "two":
		// Two programs, told apart by name as the agent's are: the second runs
		// test.ceph. Each says on stderr which operation it served.
		name := filepath.Base(os.Args[0])
		fmt.Fprintf(os.Stderr, "served %s by %s\n", op, name)
		if name == CephBinary && op == OpCheck && os.Getenv(childEnv+"_CEPH_CRASH") != "" {
			panic("librados blew up")
		}
		if name == CephBinary {
			return serve(ctx, op, fileDriver{kind: "test.ceph"})
		}
	}
	return serve(ctx, op, fileDriver{})
}

func serve(ctx context.Context, op string, d fileDriver) int {
	reg, err := driver.NewRegistry(d)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := Serve(ctx, reg, op, Hello{Version: "test"}, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type fileInputs struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// fileDriver is a real driver of a tiny kind: test.file (or kind) makes a file hold
// a text.
type fileDriver struct{ kind string }

func (d fileDriver) Kind() string { return cmp.Or(d.kind, "test.file") }

func (fileDriver) Diff(_ context.Context, raw json.RawMessage) ([]driver.Change, error) {
	var in fileInputs
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, driver.Permanent(err)
	}
	b, err := os.ReadFile(in.Path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if string(b) == in.Text {
		return nil, nil
	}
	return []driver.Change{{Summary: "write " + filepath.Base(in.Path), Apply: func(context.Context) error {
		return os.WriteFile(in.Path, []byte(in.Text), 0o600)
	}}}, nil
}

func start(t *testing.T, mode string) (*Process, *strings.Builder) {
	t.Helper()
	t.Setenv(childEnv, mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	p, err := New(context.Background(), []string{exe}, []string{"-test.run=^$"}, &log)
	if err != nil {
		t.Fatal(err)
	}
	return p, &log
}

// A step run and a drift check go through a drivers process and change the host
// exactly as the in-process registry would.
func TestRunAndCheckInAProcess(t *testing.T) {
	p, _ := start(t, "serve")
	if got := p.Kinds(); len(got) != 1 || got[0] != "test.file" || p.Hellos()[0].Version != "test" {
		t.Fatalf("hello: %+v", p.Hellos())
	}
	path := filepath.Join(t.TempDir(), "motd")
	in, _ := json.Marshal(fileInputs{Path: path, Text: "hello"})
	ctx := context.Background()

	res := p.Run(ctx, "test.file", in)
	if !res.OK() || len(res.Changes) != 1 {
		t.Fatalf("first run: %+v", res)
	}
	if b, _ := os.ReadFile(path); string(b) != "hello" {
		t.Fatalf("file holds %q", b)
	}
	if res := p.Run(ctx, "test.file", in); !res.OK() || len(res.Changes) != 0 {
		t.Fatalf("second run should find nothing to do: %+v", res)
	}
	if err := os.WriteFile(path, []byte("drifted"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := json.RawMessage(`{"path": 7}`)
	f, err := p.Check(ctx, []driver.Probe{{Kind: "test.file", Inputs: in}, {Kind: "test.file", Inputs: bad}, {Kind: "no.such", Inputs: in}})
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 3 || len(f[0].Changes) != 1 || f[0].Error != "" || f[1].Error == "" || !strings.Contains(f[2].Error, "no driver") {
		t.Fatalf("findings: %+v", f)
	}
	if b, _ := os.ReadFile(path); string(b) != "drifted" {
		t.Fatal("a check changed the host")
	}
	if res := p.Run(ctx, "test.file", bad); res.OK() || res.Retryable {
		t.Fatalf("bad inputs: want a permanent failure, got %+v", res)
	}
	if res := p.Run(ctx, "no.such", in); res.OK() || !strings.Contains(res.Error, "no driver for kind no.such") {
		t.Fatalf("unknown kind: %+v", res)
	}
}

// A drift check's process runs its Go code on one CPU, a step run's on every one,
// unless the agent's own environment sets GOMAXPROCS (the operator's choice).
func TestCheckRunsOnOneCPU(t *testing.T) {
	ctx := context.Background()
	in, _ := json.Marshal(fileInputs{Path: filepath.Join(t.TempDir(), "f"), Text: "x"})
	for _, tc := range []struct{ env, check, run string }{
		{"", "check on 1 CPUs", fmt.Sprintf("run on %d CPUs", runtime.NumCPU())},
		{"3", "check on 3 CPUs", "run on 3 CPUs"},
	} {
		t.Run("GOMAXPROCS="+tc.env, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.env)
			if tc.env == "" {
				os.Unsetenv("GOMAXPROCS")
			}
			p, log := start(t, "procs")
			if res := p.Run(ctx, "test.file", in); !res.OK() {
				t.Fatalf("run: %+v", res)
			}
			if _, err := p.Check(ctx, []driver.Probe{{Kind: "test.file", Inputs: in}}); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{tc.check, tc.run} {
				if !strings.Contains(log.String(), want) {
					t.Errorf("the drivers' log misses %q:\n%s", want, log)
				}
			}
		})
	}
}

// A drivers process that dies before answering fails the step, retryably, saying
// what killed it; its stderr reaches the agent's log.
func TestCrashedProcessFailsTheStep(t *testing.T) {
	p, log := start(t, "crash")
	res := p.Run(context.Background(), "test.file", json.RawMessage(`{}`))
	if res.OK() || !res.Retryable || !strings.Contains(res.Error, "panic: driver library blew up") {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(log.String(), `"msg":"starting"`) {
		t.Fatalf("child's log not passed on: %q", log.String())
	}
	if f, err := p.Check(context.Background(), []driver.Probe{{Kind: "test.file"}}); err != nil || len(f) != 1 || !strings.Contains(f[0].Error, "panic: driver library blew up") {
		t.Fatalf("check of a crashing process: %+v, %v; want a finding that quotes the panic", f, err)
	}
}

// A drivers binary of another protocol (half-upgraded host) or none at all is
// refused when the agent starts, saying what to do.
func TestRefusesWrongOrMissingProgram(t *testing.T) {
	t.Setenv(childEnv, "old")
	exe, _ := os.Executable()
	if _, err := New(context.Background(), []string{exe}, nil, io.Discard); err == nil || !strings.Contains(err.Error(), "protocol 0") {
		t.Fatalf("old protocol: %v", err)
	}
	t.Setenv(childEnv, "serve")
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, Binary)); err != nil {
		t.Fatal(err)
	}
	// plinth-drivers is there, plinth-drivers-ceph beside it is not.
	missing := filepath.Join(dir, CephBinary)
	if _, err := New(context.Background(), Beside(filepath.Join(dir, Binary)), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "not found") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing: %v", err)
	}
	// Two programs that both run test.file: which one a step would run in is unclear.
	if err := os.Symlink(exe, missing); err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), Beside(filepath.Join(dir, Binary)), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "both run test.file") {
		t.Fatalf("two programs for one kind: %v", err)
	}
	if _, err := New(context.Background(), nil, nil, io.Discard); err == nil {
		t.Fatal("no program: no error")
	}
}

// With two programs, each step runs in the program that runs its kind, and a drift
// check starts one process per program that has probes, keeping the findings in the
// probes' order.
func TestRoutesKindsToTheirProgram(t *testing.T) {
	t.Setenv(childEnv, "two")
	exe, _ := os.Executable()
	dir := t.TempDir()
	for _, name := range Programs() {
		if err := os.Symlink(exe, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	var log strings.Builder
	p, err := New(context.Background(), Beside(filepath.Join(dir, Binary)), []string{"-test.run=^$"}, &log)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Kinds(); !slices.Equal(got, []string{"test.ceph", "test.file"}) {
		t.Fatalf("kinds %v", got)
	}
	ctx := context.Background()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	inA, _ := json.Marshal(fileInputs{Path: a, Text: "A"})
	inB, _ := json.Marshal(fileInputs{Path: b, Text: "B"})
	log.Reset()
	if res := p.Run(ctx, "test.ceph", inB); !res.OK() || len(res.Changes) != 1 {
		t.Fatalf("run: %+v", res)
	}
	if got := log.String(); got != "served run by "+CephBinary+"\n" {
		t.Fatalf("run served by %q", got)
	}
	log.Reset()
	f, err := p.Check(ctx, []driver.Probe{{Kind: "test.file", Inputs: inA}, {Kind: "no.such", Inputs: inA}, {Kind: "test.ceph", Inputs: inB}, {Kind: "test.file", Inputs: inB}})
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 4 || len(f[0].Changes) != 1 || !strings.Contains(f[1].Error, "no driver for kind no.such") || len(f[2].Changes) != 0 || f[2].Error != "" || len(f[3].Changes) != 0 {
		t.Fatalf("findings: %+v", f)
	}
	if got := strings.Count(log.String(), "served check by "); got != 2 {
		t.Fatalf("a check over both programs started %d processes:\n%s", got, log.String())
	}
	log.Reset()
	if _, err := p.Check(ctx, []driver.Probe{{Kind: "test.file", Inputs: inA}}); err != nil {
		t.Fatal(err)
	}
	if got := log.String(); got != "served check by "+Binary+"\n" {
		t.Fatalf("a check of plinth-drivers' kinds only was served by %q", got)
	}
	log.Reset()
	if f, err := p.Check(ctx, []driver.Probe{{Kind: "no.such"}}); err != nil || len(f) != 1 || f[0].Error == "" || log.Len() != 0 {
		t.Fatalf("a check no program runs: %+v, %v, log %q", f, err, log.String())
	}
	// One program failing leaves the other's findings standing.
	if err := os.WriteFile(a, []byte("drifted"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(childEnv+"_CEPH_CRASH", "1")
	f, err = p.Check(ctx, []driver.Probe{{Kind: "test.ceph", Inputs: inB}, {Kind: "test.file", Inputs: inA}})
	if err != nil || len(f) != 2 || !strings.Contains(f[0].Error, "librados blew up") || len(f[1].Changes) != 1 || f[1].Error != "" {
		t.Fatalf("a check with one program crashing: %+v, %v", f, err)
	}
	// A program asked to run a kind it does not run (an agent from another package,
	// half way through an upgrade) answers with a failure worth retrying.
	var rep driver.Result
	var out strings.Builder
	reg, _ := driver.NewRegistry(fileDriver{})
	req, _ := json.Marshal(RunRequest{Kind: "test.ceph", Inputs: inB})
	if err := Serve(ctx, reg, OpRun, Hello{}, strings.NewReader(string(req)), &out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out.String()), &rep); err != nil || rep.OK() || !rep.Retryable || !strings.Contains(rep.Error, "no driver for kind test.ceph") {
		t.Fatalf("run of another program's kind: %+v, %v", rep, err)
	}
}

// Cancelling a run stops its process (SIGTERM; the test's child dies of it) and
// returns at once with the cancellation.
func TestCancelStopsTheProcess(t *testing.T) {
	p, _ := start(t, "slow")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	res := p.Run(ctx, "test.file", json.RawMessage(`{}`))
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("cancelled run took %v", took)
	}
	if res.OK() || !strings.Contains(res.Error, context.DeadlineExceeded.Error()) {
		t.Fatalf("result %+v", res)
	}
}

// Serve refuses what is not a request, naming the operation it wanted.
func TestServeRefusesBadRequests(t *testing.T) {
	reg, _ := driver.NewRegistry(fileDriver{})
	var out strings.Builder
	for _, tc := range []struct{ op, in, want string }{
		{"bogus", "", `unknown operation "bogus"`},
		{OpRun, "not json", "read request"},
		{OpRun, `{"kind":"test.file","inputs":{},"extra":1}`, "unknown field"},
		{OpCheck, "", "read request"},
	} {
		err := Serve(context.Background(), reg, tc.op, Hello{}, strings.NewReader(tc.in), &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: %v, want %q", tc.op, tc.in, err, tc.want)
		}
	}
	if out.Len() != 0 {
		t.Errorf("a refused request wrote a reply: %q", out.String())
	}
}
