package template

import (
	"fmt"

	controlstructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// maxMacroDepth bounds how deeply macro calls nest. gonja recurses on the
// Go stack for each call, so `{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}`
// would overflow it: a fatal error that no recover catches, so one workflow
// file would take the server down.
const maxMacroDepth = 100

// boundedMacros wraps gonja's macro parser: each macro it defines counts
// its nested calls and fails past maxMacroDepth.
func boundedMacros(parse parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := parse(p, args)
		if err != nil {
			return nil, err
		}
		return &boundedMacro{cs.(*controlstructures.MacroControlStructure)}, nil
	}
}

type boundedMacro struct {
	*controlstructures.MacroControlStructure
}

// Execute defines the macro as gonja does, then replaces it with a counting
// wrapper. A definition runs once per render, so renders never share a count.
func (m *boundedMacro) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if err := m.MacroControlStructure.Execute(r, tag); err != nil {
		return err
	}
	v, _ := r.Environment.Context.Get(m.Name)
	macro, ok := v.(exec.Macro)
	if !ok {
		return fmt.Errorf("macro %q: not defined", m.Name)
	}
	depth := 0
	r.Environment.Context.Set(m.Name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if depth >= maxMacroDepth {
			return exec.AsValue(fmt.Errorf("macro %q: calls nest deeper than %d", m.Name, maxMacroDepth))
		}
		depth++
		defer func() { depth-- }()
		return macro(params)
	}))
	return nil
}
