// Command runc-lab is the lab profile's runc (pkg/nspawn.LabProfile): booted lab
// hosts lack CAP_SYS_RESOURCE, so runc cannot set a negative oom_score_adj and
// every container with one (kubelet gives its pods -997, containerd's shim -999)
// would fail to start. Before `runc create` or `runc run` it rewrites the bundle's
// config.json with a negative process.oomScoreAdj clamped to 0, then execs the
// real runc with the same arguments. The lab site's containerd config names it
// (BinaryName = "/usr/local/sbin/runc-lab"); real hosts never use it.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// realRunc is Debian's runc.
const realRunc = "/usr/sbin/runc"

func main() {
	if err := clampBundle(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runc-lab: %v\n", err)
		os.Exit(1)
	}
	argv := append([]string{realRunc}, os.Args[1:]...)
	if err := syscall.Exec(realRunc, argv, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "runc-lab: exec %s: %v\n", realRunc, err)
		os.Exit(1)
	}
}

// clampBundle clamps the oomScoreAdj of the bundle a create or run command names.
func clampBundle(args []string) error {
	cmd, bundle := parse(args)
	if cmd != "create" && cmd != "run" {
		return nil
	}
	if bundle == "" {
		bundle = "." // runc's default: the current directory
	}
	return clampConfig(filepath.Join(bundle, "config.json"))
}

// parse finds runc's subcommand and the --bundle/-b value in its arguments.
func parse(args []string) (cmd, bundle string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--bundle" || a == "-b":
			if i+1 < len(args) {
				bundle = args[i+1]
				i++
			}
		case len(a) > len("--bundle=") && a[:len("--bundle=")] == "--bundle=":
			bundle = a[len("--bundle="):]
		case cmd == "" && (a == "create" || a == "run"):
			cmd = a
		case cmd == "" && len(a) > 0 && a[0] != '-':
			// the global options taking a value: --root, --log, --log-format, --criu
			if i > 0 && (args[i-1] == "--root" || args[i-1] == "--log" || args[i-1] == "--log-format" || args[i-1] == "--criu") {
				continue
			}
			cmd = a
		}
	}
	return cmd, bundle
}

// clampConfig rewrites path with a negative process.oomScoreAdj set to 0, leaving
// every other field as it was.
func clampConfig(path string) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil // runc itself reports a missing bundle
	}
	if err != nil {
		return err
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var proc map[string]json.RawMessage
	if raw, ok := spec["process"]; !ok || json.Unmarshal(raw, &proc) != nil {
		return nil
	}
	var adj int
	if raw, ok := proc["oomScoreAdj"]; !ok || json.Unmarshal(raw, &adj) != nil || adj >= 0 {
		return nil
	}
	proc["oomScoreAdj"] = json.RawMessage("0")
	if spec["process"], err = json.Marshal(proc); err != nil {
		return err
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	tmp := path + ".runc-lab"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
