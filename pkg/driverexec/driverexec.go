// Package driverexec runs the agent's drivers in separate processes, started for
// each step run and each drift pass and gone when they are done.
//
// Why: the drivers link Kubernetes (client-go), containerd, OVS and Ceph code — most
// of a 110 MB binary whose pages and initialised state the long-running agent would
// otherwise hold on every host, all the time. The agent itself links only this
// package's protocol and pkg/driver's contract, so it idles at a fraction of that.
//
// The drivers live in two programs: plinth-drivers runs every kind but Ceph's, and
// plinth-drivers-ceph runs Ceph's (pkg/stepkind says which runs what). Only the
// second links librados and librbd, whose C++ start-up costs a process about as much
// CPU as all the Go drivers together and a third more memory; most hosts run no Ceph
// step, so their step runs and drift passes never load it.
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

// Binary and CephBinary are the drivers programs' file names; DefaultDir is where
// the plinth-agent package installs both, DefaultPath the first.
const (
	Binary      = "plinth-drivers"
	CephBinary  = "plinth-drivers-ceph"
	DefaultDir  = "/usr/libexec/plinth"
	DefaultPath = DefaultDir + "/" + Binary
)

// Programs are the drivers programs' file names, plinth-drivers first.
func Programs() []string { return []string{Binary, CephBinary} }

// Beside returns the path of every drivers program, given plinth-drivers' path: the
// others are installed in the same directory.
func Beside(path string) []string {
	dir := filepath.Dir(path)
	out := []string{path}
	for _, name := range Programs()[1:] {
		out = append(out, filepath.Join(dir, name))
	}
	return out
}

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

// Locate finds plinth-drivers (the other programs are beside it, see Beside): next
// to the running executable (a build tree's bin/), else DefaultPath.
func Locate() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), Binary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return DefaultPath
}

// Process is the driver.Executor that runs each call in a new process of the
// program that runs the call's kind.
type Process struct {
	progs  []*program
	byKind map[string]*program
	kinds  []string
}

// program is one drivers program and what it said at hello.
type program struct {
	path  string
	args  []string
	log   io.Writer
	hello Hello
}

// New says hello to the drivers programs at paths (args are their global flags,
// given before the operation; log receives their stderr) and returns the executor
// for the kinds they run. It fails if a program is missing, speaks another protocol,
// or runs a kind another one runs too.
func New(ctx context.Context, paths []string, args []string, log io.Writer) (*Process, error) {
	if log == nil {
		log = os.Stderr
	}
	if len(paths) == 0 {
		return nil, errors.New("drivers: no drivers program given")
	}
	p := &Process{byKind: map[string]*program{}}
	for _, path := range paths {
		g := &program{path: path, args: slices.Clone(args), log: log}
		if err := g.call(ctx, OpHello, nil, &g.hello); err != nil {
			return nil, err
		}
		if g.hello.Protocol != Protocol {
			return nil, fmt.Errorf("drivers: %s speaks protocol %d, this agent %d: install plinth-agent again so both come from one package", path, g.hello.Protocol, Protocol)
		}
		for _, k := range g.hello.Kinds {
			if other, ok := p.byKind[k]; ok {
				return nil, fmt.Errorf("drivers: %s and %s both run %s: install plinth-agent again so both come from one package", other.path, path, k)
			}
			p.byKind[k] = g
			p.kinds = append(p.kinds, k)
		}
		p.progs = append(p.progs, g)
	}
	slices.Sort(p.kinds)
	return p, nil
}

// Hellos is what each program said at New, in the order of New's paths.
func (p *Process) Hellos() []Hello {
	out := make([]Hello, len(p.progs))
	for i, g := range p.progs {
		out[i] = g.hello
	}
	return out
}

// Kinds implements driver.Executor.
func (p *Process) Kinds() []string { return slices.Clone(p.kinds) }

// Run implements driver.Executor: a process that fails before answering is a
// retryable failure of the step, with the end of what it wrote to stderr.
func (p *Process) Run(ctx context.Context, kind string, inputs json.RawMessage) driver.Result {
	g, ok := p.byKind[kind]
	if !ok {
		return driver.Result{Error: driver.NoDriver(kind)}
	}
	var res driver.Result
	if err := g.call(ctx, OpRun, RunRequest{Kind: kind, Inputs: inputs}, &res); err != nil {
		return driver.Result{Error: fmt.Sprintf("%s: %v", kind, err), Retryable: true}
	}
	return res
}

// Check implements driver.Executor with one process per program that runs some of
// the probes' kinds (none for a probe no program runs: its finding says so). A
// program that fails gives its own probes a finding saying why and leaves the other
// program's findings standing; only a cancelled ctx fails the whole check.
func (p *Process) Check(ctx context.Context, probes []driver.Probe) ([]driver.Finding, error) {
	out := make([]driver.Finding, len(probes))
	idx := map[*program][]int{}
	for i, pr := range probes {
		g, ok := p.byKind[pr.Kind]
		if !ok {
			out[i] = driver.Finding{Error: driver.NoDriver(pr.Kind)}
			continue
		}
		idx[g] = append(idx[g], i)
	}
	for _, g := range p.progs {
		is := idx[g]
		if len(is) == 0 {
			continue
		}
		req := CheckRequest{Probes: make([]driver.Probe, len(is))}
		for j, i := range is {
			req.Probes[j] = probes[i]
		}
		var rep CheckReply
		err := g.call(ctx, OpCheck, req, &rep)
		if ctx.Err() != nil {
			return nil, err
		}
		if err == nil && len(rep.Findings) != len(is) {
			err = fmt.Errorf("drivers: %s: %d findings for %d probes", filepath.Base(g.path), len(rep.Findings), len(is))
		}
		for j, i := range is {
			if err != nil {
				out[i] = driver.Finding{Error: err.Error()}
			} else {
				out[i] = rep.Findings[j]
			}
		}
	}
	return out, nil
}

// call runs one operation: req (JSON) on stdin, the reply decoded from stdout.
func (p *program) call(ctx context.Context, op string, req, reply any) error {
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
	if op == OpCheck && os.Getenv("GOMAXPROCS") == "" {
		// A drift check runs every minute on every host and waits on the host, not on
		// CPUs: on one CPU the Go runtime runs no idle GC workers on the other, about
		// 3 ms less CPU a check (of 37 for an empty one). Step runs keep every CPU.
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	}
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
		if !slices.Contains(x.Kinds(), req.Kind) {
			// The agent routes by what each program said at hello, so it only asks
			// for another kind when it and this program come from different packages,
			// as while a package upgrade is half done: worth a retry.
			reply = driver.Result{Error: driver.NoDriver(req.Kind) + " (plinth-agent and its drivers programs are from different packages: retried after the agent restarts)", Retryable: true}
			break
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
