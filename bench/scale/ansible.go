package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ansibleTasks is the play's length: as many tasks as the simulated site has steps
// per host.
const ansibleTasks = 8

// runAnsible runs the same shape as an Ansible play — n hosts, ansibleTasks no-op
// tasks in order on each (ansible.builtin.ping: a module that changes nothing),
// local connection, forks 25 — and returns its wall time.
func runAnsible(ctx context.Context, dir string, n int) (time.Duration, error) {
	bin, err := exec.LookPath("ansible-playbook")
	if err != nil {
		return 0, fmt.Errorf("ansible-playbook not found (Debian: apt-get install ansible-core): %w", err)
	}
	work := filepath.Join(dir, "ansible")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return 0, err
	}
	var inv strings.Builder
	inv.WriteString("[site]\n")
	for i := range n {
		fmt.Fprintf(&inv, "%s ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n", hostName(i))
	}
	var play strings.Builder
	play.WriteString("- hosts: site\n  gather_facts: false\n  tasks:\n")
	for i := range ansibleTasks {
		fmt.Fprintf(&play, "  - name: step %d\n    ansible.builtin.ping:\n", i+1)
	}
	if err := os.WriteFile(filepath.Join(work, "inventory"), []byte(inv.String()), 0o644); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(work, "play.yml"), []byte(play.String()), 0o644); err != nil {
		return 0, err
	}
	log, err := os.Create(filepath.Join(work, "ansible.log"))
	if err != nil {
		return 0, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, bin, "-i", "inventory", "-f", "25", "play.yml")
	cmd.Dir = work
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(),
		"ANSIBLE_HOST_KEY_CHECKING=False", "ANSIBLE_RETRY_FILES_ENABLED=False",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(work, "tmp"), "ANSIBLE_REMOTE_TEMP="+filepath.Join(work, "rtmp"),
		"HOME="+work, "ANSIBLE_NOCOLOR=1")
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(log.Name())
		return 0, fmt.Errorf("ansible-playbook: %w: %s", err, tail(string(b), 2000))
	}
	return time.Since(start), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
