package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// writeWorkspace writes files (relative path -> content) under a new temp
// directory and returns it.
func writeWorkspace(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// loadMain loads a workspace made of one workflow file, .workflows/main.yaml,
// plus any other files given as name, content pairs.
func loadMain(t *testing.T, src string, more ...string) (*workflow.Workspace, workflow.Errors) {
	t.Helper()
	files := map[string]string{".workflows/main.yaml": dedent(src)}
	for i := 0; i+1 < len(more); i += 2 {
		files[more[i]] = more[i+1]
	}
	return loadDir(t, writeWorkspace(t, files))
}

func loadDir(t *testing.T, dir string) (*workflow.Workspace, workflow.Errors) {
	t.Helper()
	ws, err := Load("test", dir, map[string]string{"HOME_REGION": "eu-west-1"})
	if err == nil {
		return ws, nil
	}
	var es workflow.Errors
	if !errors.As(err, &es) {
		t.Fatalf("load: want Errors, got %T: %v", err, err)
	}
	return ws, es
}

// dedent removes the common leading indentation of a multi-line literal and
// its first empty line, so YAML can sit indented in a test table. Tabs count
// as indentation only; YAML itself must be indented with spaces.
func dedent(s string) string {
	s = strings.TrimPrefix(s, "\n")
	lines := strings.Split(s, "\n")
	prefix := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if prefix < 0 || n < prefix {
			prefix = n
		}
	}
	for i, l := range lines {
		if len(l) >= prefix && prefix > 0 {
			lines[i] = l[prefix:]
		}
	}
	return strings.Join(lines, "\n")
}
