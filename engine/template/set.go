package template

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
)

// maxCached bounds a Set: a workspace has a fixed number of template
// strings, so reaching this means strings come from elsewhere (user data)
// and caching them would only grow memory.
const maxCached = 50_000

// Set caches parsed templates by source text: one Set per workspace revision.
// Safe for concurrent use. A nil *Set is valid and caches nothing.
type Set struct {
	mu      sync.RWMutex
	entries map[string]entry
}

// entry remembers a parse failure too, so a broken template is not
// reparsed on every render.
type entry struct {
	t   *Template
	err error
}

// NewSet returns an empty cache.
func NewSet() *Set { return &Set{entries: map[string]entry{}} }

// Parse returns the cached template for src, parsing it on first use.
func (s *Set) Parse(src string) (*Template, error) {
	if s == nil {
		return Parse(src)
	}
	s.mu.RLock()
	e, ok := s.entries[src]
	s.mu.RUnlock()
	if ok {
		return e.t, e.err
	}
	t, err := Parse(src)
	s.mu.Lock()
	if s.entries == nil {
		s.entries = map[string]entry{}
	}
	if len(s.entries) < maxCached {
		s.entries[src] = entry{t: t, err: err}
	}
	s.mu.Unlock()
	return t, err
}

// Len reports how many templates the set holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.entries)
}

// Eval parses (cached) and evaluates src with vars. A string without
// template syntax is returned unchanged.
func (s *Set) Eval(src string, vars map[string]any) (any, error) {
	return s.EvalContext(context.Background(), src, vars)
}

// EvalContext is Eval bound by ctx (see Template.RenderContext).
func (s *Set) EvalContext(ctx context.Context, src string, vars map[string]any) (any, error) {
	if !IsTemplate(src) {
		return src, nil
	}
	t, err := s.Parse(src)
	if err != nil {
		return nil, err
	}
	return t.EvalContext(ctx, vars)
}

// Render parses (cached) and renders src to text.
func (s *Set) Render(src string, vars map[string]any) (string, error) {
	return s.RenderContext(context.Background(), src, vars)
}

// RenderContext is Render bound by ctx (see Template.RenderContext).
func (s *Set) RenderContext(ctx context.Context, src string, vars map[string]any) (string, error) {
	if !IsTemplate(src) {
		return src, nil
	}
	t, err := s.Parse(src)
	if err != nil {
		return "", err
	}
	return t.RenderContext(ctx, vars)
}

// EvalValue walks v (maps, slices, scalars as decoded from YAML or JSON)
// and evaluates every string in it, returning a new value; v is not changed.
// Map keys are not templates. An error names the path of the failing
// string, e.g. `args[1].name: template "{{ x }}": undefined variable "x"`.
func (s *Set) EvalValue(v any, vars map[string]any) (any, error) {
	return s.EvalValueContext(context.Background(), v, vars)
}

// EvalValueContext is EvalValue with every string evaluated under ctx.
func (s *Set) EvalValueContext(ctx context.Context, v any, vars map[string]any) (any, error) {
	return s.evalValue(ctx, v, vars, "", 0)
}

// HasTemplate reports whether any string in v (as EvalValue walks it) is a
// template: a value without one evaluates to a copy of itself.
func HasTemplate(v any) bool {
	switch t := v.(type) {
	case string:
		return IsTemplate(t)
	case map[string]any:
		for _, item := range t {
			if HasTemplate(item) {
				return true
			}
		}
	case []any:
		for _, item := range t {
			if HasTemplate(item) {
				return true
			}
		}
	case map[string]string:
		for _, item := range t {
			if IsTemplate(item) {
				return true
			}
		}
	case []string:
		for _, item := range t {
			if IsTemplate(item) {
				return true
			}
		}
	}
	return false
}

func (s *Set) evalValue(ctx context.Context, v any, vars map[string]any, path string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%s: value nested deeper than %d levels", pathOrRoot(path), maxDepth)
	}
	switch t := v.(type) {
	case string:
		out, err := s.EvalContext(ctx, t, vars)
		if err != nil && path != "" {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return out, err
	case map[string]any:
		out := make(map[string]any, len(t))
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		// Sorted, so that of several broken strings the same one is reported.
		sort.Strings(keys)
		for _, k := range keys {
			item, err := s.evalValue(ctx, t[k], vars, joinPath(path, k), depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = item
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, item := range t {
			evaluated, err := s.evalValue(ctx, item, vars, path+"["+strconv.Itoa(i)+"]", depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = evaluated
		}
		return out, nil
	case map[string]string:
		m := make(map[string]any, len(t))
		for k, item := range t {
			m[k] = item
		}
		return s.evalValue(ctx, m, vars, path, depth)
	case []string:
		l := make([]any, len(t))
		for i, item := range t {
			l[i] = item
		}
		return s.evalValue(ctx, l, vars, path, depth)
	}
	return v, nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathOrRoot(path string) string {
	if path == "" {
		return "value"
	}
	return path
}
