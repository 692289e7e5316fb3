// Command packaging builds Plinth's Debian packages, plinth-agent and
// plinth-coordinator, from binaries make build already produced, with the nfpm
// library (no debhelper, no hand-rolled ar/tar). It is its own Go module so that
// nfpm's dependencies never enter Plinth's go.mod or binaries.
//
// What each package contains and depends on is the table in packages.go; config files
// and maintainer script templates are in packaging/debian/. make packages runs it:
//
//	go -C packaging run . -repo .. -bin ../bin -out ../dist [-version 1.2.3]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("packaging", flag.ContinueOnError)
	repo := fs.String("repo", "..", "repository root (systemd/ and packaging/debian/ are read from it)")
	bin := fs.String("bin", "", "directory with plinth-agent and plinth-coordinator (default REPO/bin)")
	out := fs.String("out", "", "output directory for the .deb files (default REPO/dist)")
	version := fs.String("version", "", "Debian version (default: from git describe, e.g. 0.0.0+git812.1a2b3c4)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("packaging: unexpected arguments %q; see -h", fs.Args())
	}
	o := options{Repo: *repo, BinDir: *bin, OutDir: *out, Version: *version}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.Repo, "bin")
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join(o.Repo, "dist")
	}
	if o.Version == "" {
		v, err := gitVersion(ctx, o.Repo)
		if err != nil {
			return fmt.Errorf("packaging: version: %w", err)
		}
		o.Version = v
	} else if err := checkVersion(o.Version); err != nil {
		return fmt.Errorf("packaging: VERSION: %w", err)
	}
	o.Date = sourceDate(ctx, o.Repo)

	start := time.Now()
	paths, err := buildAll(ctx, o)
	if err != nil {
		return err
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("packaging: %w", err)
		}
		fmt.Printf("%s  %.1f MiB\n", p, float64(st.Size())/(1<<20))
	}
	fmt.Printf("packaging: %d packages, version %s, in %s\n", len(paths), o.Version, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// sourceDate is the time stamped on files and the changelog: SOURCE_DATE_EPOCH if
// set, else the last commit's time, so rebuilding a commit gives the same packages.
func sourceDate(ctx context.Context, repo string) time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	b, err := exec.CommandContext(ctx, "git", "-C", repo, "log", "-1", "--format=%ct").Output()
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	// No git or no commit: the build time will do.
	return time.Now().UTC().Truncate(time.Second)
}
