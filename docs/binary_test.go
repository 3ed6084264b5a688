package docs

import (
	"os/exec"
	"strings"
	"testing"
)

// testOnlyModules are modules only tests may need: a browser driver, a fake
// S3 server, the OpenAPI validator and the OIDC library's example
// provider. In the binary they would lengthen every first build and
// enlarge every download for nothing.
var testOnlyModules = []string{
	"github.com/chromedp/",
	"github.com/johannesboyne/gofakes3",
	"github.com/getkin/kin-openapi",
	"github.com/zitadel/oidc/v3/example/",
}

// TestTheBinaryHoldsNoTestPackage holds the main package's dependencies
// (what `go build .` compiles) free of the module's test helpers (the
// packages whose name ends in "test": enginetest, oidctest, ...) and of the
// test-only modules.
func TestTheBinaryHoldsNoTestPackage(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}{{if and .Module .Module.Main}} ours{{end}}", ".")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps .: %v%s", err, stderrOf(err))
	}
	deps := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(deps) < 2 {
		t.Fatalf("go list -deps . listed %q", out)
	}
	for _, line := range deps {
		dep, ours := strings.CutSuffix(line, " ours")
		if ours && strings.HasSuffix(dep, "test") {
			t.Errorf("the binary holds the test helper %s", dep)
		}
		for _, m := range testOnlyModules {
			if strings.HasPrefix(dep, m) {
				t.Errorf("the binary holds %s, of a test-only module", dep)
			}
		}
	}
}
