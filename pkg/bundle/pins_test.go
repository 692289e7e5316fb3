package bundle

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The flannel pin tags the image holding deploy/bundle/flanneld; the program must be
// built from that same flannel version.
func TestFlannelPinMatchesFlanneldModule(t *testing.T) {
	p := filepath.Join("..", "..", "deploy", "bundle", "flanneld", "go.mod")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^(?:require)?\s*github\.com/flannel-io/flannel (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no require of github.com/flannel-io/flannel", p)
	}
	if string(m[1]) != DefaultPins.Flannel {
		t.Errorf("%s requires flannel %s, DefaultPins.Flannel is %s: change both together", p, m[1], DefaultPins.Flannel)
	}
}
