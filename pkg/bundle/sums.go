package bundle

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// formatSums writes SHA256SUMS in the format `sha256sum -c` reads, sorted by path.
func formatSums(sums map[string]string) []byte {
	paths := make([]string, 0, len(sums))
	for p := range sums {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b bytes.Buffer
	for _, p := range paths {
		fmt.Fprintf(&b, "%s  %s\n", sums[p], p)
	}
	return b.Bytes()
}

// parseSums reads SHA256SUMS: "<hex>  <path>" (or "<hex> *<path>", binary mode) per
// line. Errors name the line (the caller names the file). Every line is checked before any path is used: a path that escapes the
// bundle, repeats, or names SHA256SUMS itself is refused with its line number.
func parseSums(data []byte) (map[string]string, error) {
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		hex, p, ok := strings.Cut(line, " ")
		if ok && len(p) > 0 && (p[0] == ' ' || p[0] == '*') {
			p = p[1:]
		} else {
			ok = false
		}
		if !ok || !sha256RE().MatchString(hex) {
			return nil, fmt.Errorf("line %d: %q is not `<64 hex digits>  <path>`", n, clip(line))
		}
		if err := checkPath(p); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if p == SumsFile {
			return nil, fmt.Errorf("line %d: lists %s itself", n, SumsFile)
		}
		if _, dup := sums[p]; dup {
			return nil, fmt.Errorf("line %d: %s is listed twice", n, p)
		}
		sums[p] = hex
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(sums) == 0 {
		return nil, fmt.Errorf("is empty")
	}
	return sums, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
