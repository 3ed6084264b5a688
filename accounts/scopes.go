package accounts

import (
	"fmt"
	"slices"
	"strings"
)

// Scope is a kind of request an API key may make (DESIGN.md "Scoped API
// keys"). A key's scopes narrow what its user may do, never widen it: the
// user's admin flag and the ACL still apply on top.
type Scope string

const (
	// ScopeRead: lists, details, logs, streams.
	ScopeRead Scope = "read"
	// ScopeRun: execute, cancel, re-run.
	ScopeRun Scope = "run"
	// ScopeApprove: approval decisions.
	ScopeApprove Scope = "approve"
	// ScopeAdmin: users, groups, and credentials (keys, password).
	ScopeAdmin Scope = "admin"
)

// AllScopes are the scopes in the order they are shown.
var AllScopes = []Scope{ScopeRead, ScopeRun, ScopeApprove, ScopeAdmin}

// ParseScopes checks names and returns them as scopes, sorted in
// AllScopes order without duplicates. An unknown name is an error naming
// the valid ones.
func ParseScopes(names []string) ([]Scope, error) {
	var out []Scope
	for _, n := range names {
		s := Scope(strings.TrimSpace(n))
		if !slices.Contains(AllScopes, s) {
			return nil, fmt.Errorf("unknown scope %q (valid: %s)", n, ScopeNames(AllScopes))
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Scope) int { return slices.Index(AllScopes, a) - slices.Index(AllScopes, b) })
	return out, nil
}

// Allows reports whether a key with these scopes may make a request that
// needs s: a key without scopes may make any.
func Allows(scopes []Scope, s Scope) bool {
	return len(scopes) == 0 || slices.Contains(scopes, s)
}

// ScopeNames lists scopes comma-separated, for messages.
func ScopeNames(scopes []Scope) string {
	names := make([]string, len(scopes))
	for i, s := range scopes {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
