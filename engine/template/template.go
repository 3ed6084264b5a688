// Package template renders the workflow format's {{ }} expressions (Jinja
// syntax, strict undefined) and evaluates `when` conditions.
package template

import "errors"

// errUnimplemented marks the skeleton; the template work replaces it.
var errUnimplemented = errors.New("template: not implemented yet")

// Template is a parsed template, safe for concurrent rendering.
type Template struct {
	src string
}

// Parse parses src once; render it many times.
func Parse(src string) (*Template, error) { return nil, errUnimplemented }

// Render renders the template to text with vars as its variables.
// An undefined variable is an error.
func (t *Template) Render(vars map[string]any) (string, error) { return "", errUnimplemented }

// Eval renders like Render, except that a template that is exactly one
// `{{ expression }}` yields the expression's native value (map, slice,
// number, bool, nil) rather than its text.
func (t *Template) Eval(vars map[string]any) (any, error) { return nil, errUnimplemented }

// IsTemplate reports whether s contains template syntax at all; plain
// strings need no parsing or rendering.
func IsTemplate(s string) bool { return false }

// Truthy applies the spec's `when` rule to a rendered value: empty, "false",
// "0", "null" and "none" (case-insensitive) are false; everything else is true.
func Truthy(v any) bool { return false }

// Set caches parsed templates by source text: one Set per workspace revision.
// Safe for concurrent use.
type Set struct{}

// NewSet returns an empty cache.
func NewSet() *Set { return &Set{} }

// Parse returns the cached template for src, parsing it on first use.
func (s *Set) Parse(src string) (*Template, error) { return Parse(src) }

// Eval parses (cached) and evaluates src with vars. A string without
// template syntax is returned unchanged.
func (s *Set) Eval(src string, vars map[string]any) (any, error) { return nil, errUnimplemented }

// Render parses (cached) and renders src to text.
func (s *Set) Render(src string, vars map[string]any) (string, error) { return "", errUnimplemented }

// EvalValue walks v (maps, slices, scalars as decoded from YAML or JSON)
// and evaluates every string in it, returning a new value; v is not changed.
func (s *Set) EvalValue(v any, vars map[string]any) (any, error) { return nil, errUnimplemented }
