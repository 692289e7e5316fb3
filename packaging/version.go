package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Debian versions of the packages: an explicit one (make packages VERSION=...) is
// checked and used as given; otherwise it comes from git, increasing with every commit
// so that dpkg sees each new build as an upgrade:
//
//	tag v1.2.0 exactly        1.2.0
//	5 commits after v1.2.0    1.2.0+git5.1a2b3c4
//	no tag, 812 commits       0.0.0+git812.1a2b3c4
//	uncommitted changes       ... with .dirty appended (1.2.0+dirty on a tag)

// debVersionRE is Debian policy's upstream_version (no epoch, no revision: Plinth's
// packages are native): starts with a digit, then alphanumerics and . + ~.
var debVersionRE = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

func checkVersion(v string) error {
	if !debVersionRE.MatchString(v) {
		return fmt.Errorf("version %q: a Debian version must start with a digit and contain only letters, digits and . + ~ (e.g. 1.2.3 or 1.2.3~rc1)", v)
	}
	return nil
}

// describeRE matches `git describe --tags --long --match v[0-9]*`: TAG-N-gSHA.
var describeRE = regexp.MustCompile(`^v([0-9][A-Za-z0-9.+~]*)-([0-9]+)-g([0-9a-f]+)$`)

// versionFromGit maps git's view of the work tree to a Debian version. describe is
// the output of `git describe --tags --long --match 'v[0-9]*'` ("" without a tag),
// commits the number of commits reachable from HEAD, sha the short commit id.
func versionFromGit(describe string, commits int, sha string, dirty bool) (string, error) {
	var v string
	if describe == "" {
		v = fmt.Sprintf("0.0.0+git%d.%s", commits, sha)
	} else {
		m := describeRE.FindStringSubmatch(describe)
		if m == nil {
			return "", fmt.Errorf("git describe %q: want vX.Y.Z-N-gSHA", describe)
		}
		v = m[1]
		if m[2] != "0" {
			v += "+git" + m[2] + "." + m[3]
		}
	}
	if dirty {
		if strings.Contains(v, "+") {
			v += ".dirty"
		} else {
			v += "+dirty"
		}
	}
	return v, checkVersion(v)
}

// gitVersion runs git in repo and returns versionFromGit's answer.
func gitVersion(ctx context.Context, repo string) (string, error) {
	git := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...).Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w (set VERSION= to build without git)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	count, err := git("rev-list", "--count", "HEAD")
	if err != nil {
		return "", err
	}
	commits, err := strconv.Atoi(count)
	if err != nil {
		return "", fmt.Errorf("git rev-list --count HEAD: %q is not a number", count)
	}
	sha, err := git("rev-parse", "--short=7", "HEAD")
	if err != nil {
		return "", err
	}
	// No matching tag is not an error: the version then counts commits from 0.0.0.
	describe, _ := git("describe", "--tags", "--long", "--match", "v[0-9]*")
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", err
	}
	return versionFromGit(describe, commits, sha, status != "")
}
