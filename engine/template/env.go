package template

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlstructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// maxRange bounds range(): for_each takes at most 10,000 items, and an
// unbounded range would let one template exhaust memory.
const maxRange = 100_000

// rootID names the only template a loader serves.
const rootID = "template"

// gonjaConfig is shared read-only by every template: gonja copies it per render.
var gonjaConfig = func() *config.Config {
	c := config.New()
	c.StrictUndefined = true
	c.AutoEscape = false
	// Scripts are templates: their final newline is part of the script.
	c.KeepTrailingNewline = true
	return c
}()

// environment is the gonja environment of every template. It is built once
// and never changed afterwards, so templates may share it across goroutines.
var environment = newEnvironment()

// Control structures that read other files (include, import, from, extends,
// block) are left out: a template is one string, never a path on the server.
var controlStructureNames = []string{
	"autoescape", "filter", "for", "if", "macro", "raw", "set", "with",
	"do", "break", "continue", "call",
}

// Methods that change their receiver in place are left out: variables are
// shared with the caller, often across goroutines.
var (
	dictMethodNames = []string{"keys", "values", "items", "get", "copy"}
	listMethodNames = []string{"copy"}
)

func newEnvironment() *exec.Environment {
	structures := map[string]parser.ControlStructureParser{}
	for _, name := range controlStructureNames {
		if p, ok := controlstructures.All.Get(name); ok {
			structures[name] = p
		}
	}
	structures["macro"] = boundedMacros(structures["macro"])

	filterFuncs := map[string]exec.FilterFunction{}
	for _, name := range builtinFilterNames() {
		if fn, ok := builtins.Filters.Get(name); ok {
			filterFuncs[name] = keepErrors(fn)
		}
	}
	for name, fn := range extraFilters() {
		filterFuncs[name] = keepErrors(fn)
	}
	// default exists to replace undefined values, so it must see the error.
	for _, name := range []string{"default", "d"} {
		if fn, ok := builtins.Filters.Get(name); ok {
			filterFuncs[name] = fn
		}
	}
	for name, fn := range filterFuncs {
		filterFuncs[name] = guarded(name, fn)
	}
	for name, fn := range guardFilters() {
		filterFuncs[name] = fn
	}

	tests := exec.NewTestSet(map[string]exec.TestFunction{})
	tests.Update(builtins.Tests)

	methods := builtins.Methods
	methods.Dict = pickMethods(builtins.Methods.Dict, dictMethodNames)
	methods.List = pickMethods(builtins.Methods.List, listMethodNames)

	// Jinja spells the null literal none as well as None; gonja only knows None.
	globals := map[string]any{"range": rangeFunction, "none": nil}
	for _, name := range []string{"dict", "namespace", "cycler", "joiner"} {
		if fn, ok := builtins.GlobalFunctions.Get(name); ok {
			globals[name] = fn
		}
	}

	return &exec.Environment{
		Context:           exec.NewContext(globals),
		Filters:           exec.NewFilterSet(filterFuncs),
		Tests:             tests,
		ControlStructures: exec.NewControlStructureSet(structures),
		Methods:           methods,
	}
}

func pickMethods[I any](from *exec.MethodSet[I], names []string) *exec.MethodSet[I] {
	picked := map[string]exec.Method[I]{}
	for _, name := range names {
		if m, ok := from.Get(name); ok {
			picked[name] = m
		}
	}
	return exec.NewMethodSet(picked)
}

// rangeFunction replaces gonja's range, which feeds a channel from a
// goroutine that leaks when a loop stops early; a bounded list does not.
func rangeFunction(_ *exec.Evaluator, params *exec.VarArgs) ([]int, error) {
	args := make([]int, len(params.Args))
	for i, a := range params.Args {
		if !a.IsInteger() {
			return nil, exec.ErrInvalidCall(errors.New("range arguments must be integers"))
		}
		args[i] = a.Integer()
	}
	start, stop, step := 0, 0, 1
	switch len(args) {
	case 1:
		stop = args[0]
	case 2:
		start, stop = args[0], args[1]
	case 3:
		start, stop, step = args[0], args[1], args[2]
	default:
		return nil, exec.ErrInvalidCall(errors.New("range takes [start,] stop[, step]"))
	}
	if step == 0 {
		return nil, exec.ErrInvalidCall(errors.New("range step cannot be 0"))
	}
	out := []int{}
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if len(out) == maxRange {
			return nil, fmt.Errorf("range yields more than %d items", maxRange)
		}
		out = append(out, i)
	}
	return out, nil
}

// rootLoader serves the template's own source and refuses every other name.
type rootLoader struct{ src string }

var _ loaders.Loader = rootLoader{}

func (l rootLoader) Read(path string) (io.Reader, error) {
	if path != rootID {
		return nil, fmt.Errorf("templates cannot load other files (%q)", path)
	}
	return strings.NewReader(l.src), nil
}

func (l rootLoader) Resolve(path string) (string, error) {
	if path != rootID {
		return "", fmt.Errorf("templates cannot load other files (%q)", path)
	}
	return path, nil
}

func (l rootLoader) Inherit(string) (loaders.Loader, error) { return l, nil }
