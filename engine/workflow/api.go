package workflow

import (
	"errors"
	"fmt"
	"strings"
)

// errUnimplemented marks the skeleton; the loader work replaces it.
var errUnimplemented = errors.New("workflow: not implemented yet")

// Error is one problem found in a workspace, located in its file.
type Error struct {
	File string // path relative to the workspace root, e.g. ".workflows/main.yaml"
	Line int
	Col  int
	Path string // dotted path of the offending key, e.g. "tasks.deploy.flow.build.depends_on"
	Msg  string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Col)
	}
	if e.Path != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Path, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// Errors is every problem found while loading a workspace.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Load reads and validates the workspace in dir. env supplies `env.*` for
// the secrets block (nil = the process environment). A workspace with
// problems returns Errors listing all of them.
func Load(name, dir string, env map[string]string) (*Workspace, error) {
	return nil, errUnimplemented
}

// ShippedFiles lists the files a workspace ships to workers (relative,
// slash-separated, sorted): everything under dir except VCS metadata. The
// revision hashes exactly these files; the worker tarball holds exactly them.
func ShippedFiles(dir string) ([]string, error) { return nil, errUnimplemented }

// ResolveInput applies input definitions to a submitted input: defaults
// (string defaults rendered with `secret.*`), required fields, options,
// type coercion and connection resolution. Errors name the field. Keys not
// defined pass through unchanged.
func (ws *Workspace) ResolveInput(defs *Inputs, given map[string]any) (map[string]any, error) {
	return nil, errUnimplemented
}
