package workflow

import (
	"fmt"
	"strings"
)

// Error is one problem found in a workspace, located in its file.
type Error struct {
	File string // path relative to the workspace root, e.g. ".workflows/main.yaml"
	Line int
	Col  int
	Path string // dotted path of the offending key, e.g. "tasks.deploy.flow.build.depends_on"
	Msg  string
	// Tasks are the access paths (TaskPath) of the tasks File defines, as
	// far as they decoded, or "" for one whose folder is unknown: the API
	// shows a problem to a user under access control only if they may
	// view every one (a file of no task concerns admins only).
	Tasks []string
}

func (e *Error) Error() string {
	if e.File == "" {
		return e.Msg
	}
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
