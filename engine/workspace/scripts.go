package workspace

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/template/quote"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// checkScript refuses, at file:line:col, each {{ }} of a script (or of a
// docker or pod cmd, a shell script run by `sh -c`) that stands where no
// quoting makes its value data: a command name, arithmetic, eval's
// arguments and the like. A shell script whose interpreter is not a POSIX
// shell cannot hold quoted values at all.
func (l *loader) checkScript(n node, src string, lang quote.Lang, interp node, interpreter string) {
	if !template.IsTemplate(src) {
		return
	}
	if _, err := l.ws.Templates.Parse(src); err != nil {
		return // reported as an invalid template
	}
	if lang == quote.Shell && interpreter != "" {
		name := strings.TrimSuffix(filepath.Base(filepath.ToSlash(interpreter)), ".exe")
		if !workflow.PosixShell(name) && hasPlaceholder(src) {
			interp.errorf("interpreter %q is not a POSIX shell, so the script's {{ }} values cannot be quoted for it: "+
				"use sh or bash, or read the values from the environment ($INPUT_NAME) instead of {{ }}", interpreter)
			return
		}
	}
	for _, p := range template.CheckScript(src, lang) {
		l.addErr(n.templateAt(p.Line, p.Col), n.path, p.Msg)
	}
}

// checkArgvScript checks the shell script an entrypoint or command runs
// with -c, as checkScript does a cmd.
func (l *loader) checkArgvScript(o obj, a *workflow.Action) {
	for key := range workflow.ShellScriptArgs(a.Entrypoint, a.Command) {
		field, rest, _ := strings.Cut(key, "[")
		i, _ := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		v, ok := o.get(field)
		if !ok {
			continue
		}
		items, _ := v.list()
		list := a.Command
		if field == "entrypoint" {
			list = a.Entrypoint
		}
		if i < len(items) && i < len(list) {
			l.checkScript(items[i], list[i], quote.Shell, node{}, "")
			l.warnRawData(items[i], list[i])
		}
	}
}

func hasPlaceholder(src string) bool {
	for _, t := range template.Tags(src) {
		if !t.Raw {
			return true
		}
	}
	return false
}

// warnRawData warns of each `{{ x | raw }}` of a script whose value comes
// from a job's input (an API caller's, an event's or a hook's data), a
// step's output or a for_each item: data whoever runs the task chooses,
// going into the script as code.
func (l *loader) warnRawData(n node, src string) {
	for _, t := range template.Tags(src) {
		if !t.Raw {
			continue
		}
		refs, _ := template.References(t.Text)
		for _, r := range refs {
			if from := dataSource(r.Path); from != "" {
				p := n.templateAt(t.Line, t.Col)
				l.ws.Warnings = append(l.ws.Warnings, &workflow.Error{File: p.file, Line: p.line, Col: p.col, Path: n.path, Msg: fmt.Sprintf(
					"%s puts %s into the script as code: drop raw to have it quoted as data", t.Text, from)})
				break
			}
		}
	}
}

// dataSource names where a template variable's value comes from when
// someone other than the workflow's author chooses it.
func dataSource(path []string) string {
	switch {
	case len(path) == 0:
		return ""
	case path[0] == "input":
		return "a job input (an API caller's, an event's or a hook's data)"
	case path[0] == "each":
		return "a for_each item"
	case len(path) > 1 && path[1] == "output":
		return fmt.Sprintf("step %s's output", path[0])
	}
	return ""
}
