package runners

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// ScriptExt is the file extension an inline script is written with; some
// interpreters (go run, deno, bun) decide how to run a file by it.
var ScriptExt = map[string]string{
	"shell":      ".sh",
	"python":     ".py",
	"javascript": ".js",
	"typescript": ".ts",
	"go":         ".go",
}

// NormalLanguage maps the language field (with its aliases) to a key of
// ScriptExt; empty means shell.
func NormalLanguage(lang string) (string, error) {
	if norm, ok := workflow.NormalLanguage(lang); ok {
		return norm, nil
	}
	return "", fmt.Errorf("unsupported language %q (want shell, python, javascript, typescript or go)", lang)
}

// ScriptArgs is the command line running file with the interpreter at path;
// some interpreters need a subcommand.
func ScriptArgs(path, file string) []string {
	switch strings.TrimSuffix(filepath.Base(path), ".exe") {
	case "uv":
		return []string{path, "run", "--script", file}
	case "bun":
		return []string{path, "run", file}
	case "deno":
		return []string{path, "run", "-A", file}
	case "go":
		return []string{path, "run", file}
	case "busybox":
		return []string{path, "sh", file}
	}
	return []string{path, file}
}

// InsideDir joins a workspace-relative path to root and refuses one that
// leaves it (absolute, or climbing out with ..).
func InsideDir(root, rel, what string) (string, error) {
	if rel == "" {
		return root, nil
	}
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s %q: must be relative to the workspace", what, rel)
	}
	clean := filepath.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s %q: leaves the workspace", what, rel)
	}
	return filepath.Join(root, clean), nil
}
