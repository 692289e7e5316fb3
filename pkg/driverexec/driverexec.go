// Package driverexec runs the agent's drivers in a separate process, plinth-drivers,
// started for each step run and each drift pass and gone when it is done.
//
// Why: the drivers link Kubernetes (client-go), containerd, OVS and Ceph code — most
// of a 110 MB binary whose pages and initialised state the long-running agent would
// otherwise hold on every host, all the time. The agent itself links only this
// package's protocol and pkg/driver's contract, so it idles at a fraction of that.
//
// The protocol is one JSON request on the child's stdin and one JSON reply on its
// stdout; the child's log goes to the agent's stderr (the journal). Inputs carry
// unsealed secrets, so they travel only through the pipe, never argv or the
// environment.
package driverexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/plinth-dev/plinth/pkg/driver"
)

// Protocol is the version of the request/reply format; the agent refuses a drivers
// binary that speaks another (a half-upgraded host).
const Protocol = 1

// Binary is the drivers program's file name; DefaultPath is where the plinth-agent
// package installs it.
const (
	Binary      = "plinth-drivers"
	DefaultPath = "/usr/libexec/plinth/" + Binary
)

// The operations, the drivers program's subcommands.
const (
	OpHello = "hello"
	OpRun   = "run"
	OpCheck = "check"
)

// RunRequest is OpRun's stdin: one step.
type RunRequest struct {
	Kind   string          `json:"kind"`
	Inputs json.RawMessage `json:"inputs"`
}

// CheckRequest is OpCheck's stdin; CheckReply its stdout.
type CheckRequest struct {
	Probes []driver.Probe `json:"probes"`
}

type CheckReply struct {
	Findings []driver.Finding `json:"findings"`
}

// Hello is OpHello's stdout: what the drivers program is and runs.
type Hello struct {
	Protocol int      `json:"protocol"`
	Version  string   `json:"version"`
	Kinds    []string `json:"kinds"`
}

// stopGrace is how long a cancelled child has, after SIGTERM, before SIGKILL.
const stopGrace = 10 * time.Second

// Locate finds the drivers program: next to the running executable (a build tree's
// bin/), else DefaultPath.
func Locate() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), Binary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return DefaultPath
}

// Process is the driver.Executor that runs each call in a new drivers process.
type Process struct {
	path  string
	args  []string
	log   io.Writer
	hello Hello
}

// New says hello to the drivers program at path (args are its global flags, given
// before the operation; log receives its stderr) and returns the executor for the
// kinds it runs. It fails if the program is missing or speaks another protocol.
func New(ctx context.Context, path string, args []string, log io.Writer) (*Process, error) {
	if log == nil {
		log = os.Stderr
	}
	p := &Process{path: path, args: slices.Clone(args), log: log}
	if err := p.call(ctx, OpHello, nil, &p.hello); err != nil {
		return nil, err
	}
	if p.hello.Protocol != Protocol {
		return nil, fmt.Errorf("drivers: %s speaks protocol %d, this agent %d: install plinth-agent again so both come from one package", path, p.hello.Protocol, Protocol)
	}
	slices.Sort(p.hello.Kinds)
	return p, nil
}

// Hello is what the drivers program said at New.
func (p *Process) Hello() Hello { return p.hello }

// Kinds implements driver.Executor.
func (p *Process) Kinds() []string { return slices.Clone(p.hello.Kinds) }

// Run implements driver.Executor: a process that fails before answering is a
// retryable failure of the step, with the end of what it wrote to stderr.
func (p *Process) Run(ctx context.Context, kind string, inputs json.RawMessage) driver.Result {
	if !slices.Contains(p.hello.Kinds, kind) {
		return driver.Result{Error: driver.NoDriver(kind)}
	}
	var res driver.Result
	if err := p.call(ctx, OpRun, RunRequest{Kind: kind, Inputs: inputs}, &res); err != nil {
		return driver.Result{Error: fmt.Sprintf("%s: %v", kind, err), Retryable: true}
	}
	return res
}

// Check implements driver.Executor with one process for every probe.
func (p *Process) Check(ctx context.Context, probes []driver.Probe) ([]driver.Finding, error) {
	var rep CheckReply
	if err := p.call(ctx, OpCheck, CheckRequest{Probes: probes}, &rep); err != nil {
		return nil, err
	}
	if len(rep.Findings) != len(probes) {
		return nil, fmt.Errorf("drivers: %d findings for %d probes", len(rep.Findings), len(probes))
	}
	return rep.Findings, nil
}

// call runs one operation: req (JSON) on stdin, the reply decoded from stdout.
func (p *Process) call(ctx context.Context, op string, req, reply any) error {
	var stdin io.Reader
	if req != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("drivers: %s: encode request: %w", op, err)
		}
		stdin = bytes.NewReader(b)
	}
	cmd := exec.CommandContext(ctx, p.path, append(slices.Clone(p.args), op)...)
	cmd.Stdin = stdin
	var out bytes.Buffer
	tail := &tailBuffer{max: 2048}
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(p.log, tail)
	// A child outliving an agent that was killed would run a step beside the next
	// agent's run of it: the kernel kills it with its parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("drivers: %s: %w", op, ctx.Err())
	}
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("drivers: %s not found (it comes with the plinth-agent package): %w", p.path, err)
		}
		return fmt.Errorf("drivers: %s %s: %v%s", filepath.Base(p.path), op, err, tail.suffix())
	}
	if err := json.Unmarshal(out.Bytes(), reply); err != nil {
		return fmt.Errorf("drivers: %s %s: bad reply: %v%s", filepath.Base(p.path), op, err, tail.suffix())
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// suffix is what an error message quotes from stderr: a Go panic's first line
// (what panicked; the stack follows it), else the last line.
func (t *tailBuffer) suffix() string {
	s := strings.TrimSpace(string(t.b))
	if i := strings.Index(s, "panic: "); i >= 0 {
		s, _, _ = strings.Cut(s[i:], "\n")
	} else if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return ""
	}
	return ": " + s
}

// Serve is the drivers program's side of op: it reads the request from in, runs it
// on x and writes the reply to out. hello is what OpHello answers (its Kinds are
// filled from x).
func Serve(ctx context.Context, x driver.Executor, op string, hello Hello, in io.Reader, out io.Writer) error {
	var reply any
	switch op {
	case OpHello:
		hello.Protocol = Protocol
		hello.Kinds = x.Kinds()
		reply = hello
	case OpRun:
		var req RunRequest
		if err := decode(in, &req); err != nil {
			return err
		}
		reply = x.Run(ctx, req.Kind, req.Inputs)
	case OpCheck:
		var req CheckRequest
		if err := decode(in, &req); err != nil {
			return err
		}
		f, err := x.Check(ctx, req.Probes)
		if err != nil {
			return fmt.Errorf("drivers: check: %w", err)
		}
		reply = CheckReply{Findings: f}
	default:
		return fmt.Errorf("drivers: unknown operation %q (want %s, %s or %s)", op, OpHello, OpRun, OpCheck)
	}
	if err := json.NewEncoder(out).Encode(reply); err != nil {
		return fmt.Errorf("drivers: %s: write reply: %w", op, err)
	}
	return nil
}

func decode(in io.Reader, v any) error {
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("drivers: read request: %w", err)
	}
	return nil
}
