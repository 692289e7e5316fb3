package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/plinth-dev/plinth/pkg/nspawn"
)

// defaultBundleGlob is where `make bundle` leaves site bundles, seen from bench/.
const defaultBundleGlob = "../dist/plinth-bundle-*.tar"

// resolvePaths fills in the defaults of -bundle and -runc-wrapper and checks that
// what the lab needs exists.
func resolvePaths(o *options) error {
	if _, err := os.Stat(filepath.Join(o.bin, "plinth-coordinator")); err != nil {
		return fmt.Errorf("-bin %s: %w (want the directory holding plinth-coordinator)", o.bin, err)
	}
	if o.bundle == "" {
		newest, err := newestFile(defaultBundleGlob)
		if err != nil {
			return err
		}
		if newest == "" {
			return fmt.Errorf("no site bundle matches %s: run `make bundle`, or pass -bundle FILE", defaultBundleGlob)
		}
		o.bundle = newest
	}
	abs, err := filepath.Abs(o.bundle)
	if err != nil {
		return err
	}
	o.bundle = abs
	if _, err := os.Stat(o.bundle); err != nil {
		return fmt.Errorf("-bundle: %w (make bundle builds dist/plinth-bundle-VERSION.tar)", err)
	}
	if o.kube {
		m, err := filepath.Abs(o.manifest)
		if err != nil {
			return err
		}
		if _, err := os.Stat(m); err != nil {
			return fmt.Errorf("-manifest: %w (the lab's site manifest is examples/lab/site.yaml)", err)
		}
		o.manifest = m
	}
	if o.runcWrapper == "" {
		if p := filepath.Join(o.bin, "runc-lab"); fileExists(p) {
			o.runcWrapper = p
		}
	} else if !fileExists(o.runcWrapper) {
		return fmt.Errorf("-runc-wrapper %s: no such file (go build -o %s ./cmd/runc-lab)", o.runcWrapper, o.runcWrapper)
	}
	return nil
}

// newestFile is the most recently modified file matching pattern, or "".
func newestFile(pattern string) (string, error) {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return "", fmt.Errorf("glob %s: %w", pattern, err)
	}
	var newest string
	var at time.Time
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.ModTime().After(at) {
			newest, at = m, st.ModTime()
		}
	}
	return newest, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	out, err := nspawn.MountPoints(dir)
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out, err
}

// removeScratch deletes dir unless something is still mounted below it: a host's
// overlay root, or the /dev a rootfs build bind-mounts, must never be walked by
// RemoveAll.
func removeScratch(dir string) error {
	mps, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("scratch %s: %w (kept)", dir, err)
	}
	if len(mps) > 0 {
		return fmt.Errorf("scratch %s kept: still mounted below it: %s (unmount them, then remove it)", dir, strings.Join(mps, ", "))
	}
	return os.RemoveAll(dir)
}
