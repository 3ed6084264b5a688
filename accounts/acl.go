package accounts

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Action is what an ACL lets a user do with a task: Deny < View < Run.
type Action int

// The actions, in order: a higher one includes the lower.
const (
	// Deny: the task and its jobs are invisible (404).
	Deny Action = iota
	// View: the task and its jobs are readable; executing, cancelling,
	// approving and re-running are refused (403).
	View
	// Run: everything.
	Run
)

var actionNames = []string{"deny", "view", "run"}

func (a Action) String() string {
	if a < Deny || a > Run {
		return fmt.Sprintf("Action(%d)", int(a))
	}
	return actionNames[a]
}

// ParseAction reads "deny", "view" or "run".
func ParseAction(s string) (Action, error) {
	if i := slices.Index(actionNames, s); i >= 0 {
		return Action(i), nil
	}
	return Deny, fmt.Errorf("unknown action %q (deny, view or run)", s)
}

// ACLRule grants Action on the tasks matching Tasks in the workspaces
// matching Workspace to the listed users (by email) and groups.
type ACLRule struct {
	Workspace string
	Tasks     []string
	Action    Action
	Groups    []string
	Users     []string
}

// ACL is the server's access control list (DESIGN.md "Authorization").
// A nil *ACL allows everything. Replace reloads it in place: everything
// that holds the pointer judges by the new rules from then on.
type ACL struct {
	Default Action
	Rules   []ACLRule

	// live is the ACL in force once Replace was called (nil before).
	live atomic.Pointer[ACL]
	// mu guards changed, which Replace closes: open streams wait on it to
	// re-check what their user may see at once.
	mu      sync.Mutex
	changed chan struct{}
}

// Replace puts next's default and rules in force in place of a's, then
// tells every waiter of Changed.
func (a *ACL) Replace(next *ACL) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.live.Store(&ACL{Default: next.Default, Rules: slices.Clone(next.Rules)})
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
}

// Changed is closed by the next Replace; a nil ACL never changes (nil).
func (a *ACL) Changed() <-chan struct{} {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	return a.changed
}

// Permission is what u may do with the task at path (`folder/task`, or
// `task` without a folder) of workspace: admins always Run; otherwise the
// highest action of the rules that match the workspace, a task pattern and
// the user (email or a group), or Default when none does.
func (a *ACL) Permission(u *User, workspace, path string) Action {
	if a == nil || u.IsAdmin {
		return Run
	}
	if live := a.live.Load(); live != nil {
		a = live
	}
	best, matched := Deny, false
	for i := range a.Rules {
		r := &a.Rules[i]
		if (matched && r.Action <= best) || !r.appliesTo(u) || !Glob(r.Workspace, workspace) {
			continue
		}
		if slices.ContainsFunc(r.Tasks, func(p string) bool { return Glob(p, path) }) {
			best, matched = r.Action, true
		}
	}
	if !matched {
		return a.Default
	}
	return best
}

func (r *ACLRule) appliesTo(u *User) bool {
	for _, e := range r.Users {
		if strings.EqualFold(e, u.Email) {
			return true
		}
	}
	for _, g := range r.Groups {
		if slices.Contains(u.Groups, g) {
			return true
		}
	}
	return false
}

// Glob matches s against pattern, where `*` stands for any run of
// characters, `/` included, and every other character for itself.
func Glob(pattern, s string) bool {
	// Classic two-pointer wildcard match: on a mismatch, let the last `*`
	// swallow one more character.
	p, i, star, mark := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
