package accounts

import "testing"

func TestGlobStarMatchesAnyRunIncludingSlashes(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "deploy/prod/web", true},
		{"deploy/*", "deploy/web", true},
		{"deploy/*", "deploy/eu/web", true},
		{"deploy/*", "deploy", false},
		{"deploy/*", "redeploy/web", false},
		{"*/web", "deploy/eu/web", true},
		{"*web*", "deploy/webapp", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"build", "build", true},
		{"build", "builds", false},
		{"prod*", "production", true},
		{"", "", true},
		{"", "x", false},
	} {
		if got := Glob(tt.pattern, tt.s); got != tt.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestPermissionTakesTheHighestMatchingRuleElseTheDefault(t *testing.T) {
	acl := &ACL{Default: Deny, Rules: []ACLRule{
		{Workspace: "*", Tasks: []string{"*"}, Action: Run, Groups: []string{"devops"}},
		{Workspace: "production", Tasks: []string{"deploy/*"}, Action: View, Groups: []string{"engineering"}, Users: []string{"contractor@ext.com"}},
		{Workspace: "production", Tasks: []string{"deploy/hotfix"}, Action: Deny, Groups: []string{"engineering"}},
		{Workspace: "staging", Tasks: []string{"smoke", "deploy/*"}, Action: Run, Groups: []string{"engineering"}},
	}}
	devops := &User{Email: "ops@x.io", Groups: []string{"devops"}}
	eng := &User{Email: "eng@x.io", Groups: []string{"engineering"}}
	both := &User{Email: "lead@x.io", Groups: []string{"engineering", "devops"}}
	contractor := &User{Email: "Contractor@Ext.com"}
	nobody := &User{Email: "nobody@x.io"}
	admin := &User{Email: "root@x.io", IsAdmin: true}
	for _, tt := range []struct {
		name     string
		u        *User
		ws, path string
		want     Action
	}{
		{"group rule on every workspace", devops, "anything", "a/b/c", Run},
		{"view in production", eng, "production", "deploy/web", View},
		{"a deny rule does not beat a view rule", eng, "production", "deploy/hotfix", View},
		{"highest wins over rule order", both, "production", "deploy/web", Run},
		{"no rule matches the path: default", eng, "production", "build", Deny},
		{"second task pattern matches", eng, "staging", "smoke", Run},
		{"user by email in any case", contractor, "production", "deploy/eu/web", View},
		{"user outside every rule", nobody, "staging", "smoke", Deny},
		{"admins always run", admin, "production", "secret", Run},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := acl.Permission(tt.u, tt.ws, tt.path); got != tt.want {
				t.Fatalf("Permission = %v, want %v", got, tt.want)
			}
		})
	}
	viewAll := &ACL{Default: View}
	if got := viewAll.Permission(nobody, "w", "t"); got != View {
		t.Fatalf("default view: %v", got)
	}
	if got := (*ACL)(nil).Permission(nobody, "w", "t"); got != Run {
		t.Fatalf("no ACL: %v, want run", got)
	}
}

// Replace swaps the rules in place: the same pointer judges by the new
// ones at once, Changed tells its waiters, and the replacement is a copy
// (editing the ACL it came from changes nothing).
func TestReplaceReloadsTheACLInPlaceAndTellsItsWaiters(t *testing.T) {
	acl := &ACL{Default: Deny, Rules: []ACLRule{{Workspace: "*", Tasks: []string{"*"}, Action: Run, Groups: []string{"ops"}}}}
	ops := &User{Email: "ops@x.io", Groups: []string{"ops"}}
	changed := acl.Changed()
	if acl.Changed() != changed {
		t.Fatal("two waiters before a Replace got different channels")
	}
	next := &ACL{Default: View, Rules: []ACLRule{{Workspace: "*", Tasks: []string{"public/*"}, Action: Run, Groups: []string{"ops"}}}}
	acl.Replace(next)
	select {
	case <-changed:
	default:
		t.Fatal("Replace did not close the Changed channel")
	}
	if got := acl.Permission(ops, "main", "deploy"); got != View {
		t.Errorf("after Replace, a task outside the new rules is %v, want the new default view", got)
	}
	if got := acl.Permission(ops, "main", "public/site"); got != Run {
		t.Errorf("after Replace, a task of the new rule is %v, want run", got)
	}
	next.Rules[0].Action = Deny
	if got := acl.Permission(ops, "main", "public/site"); got != Run {
		t.Errorf("editing the replacement's source changed the ACL in force: %v", got)
	}
	select {
	case <-acl.Changed():
		t.Fatal("the channel of the next Replace is already closed")
	default:
	}
	var none *ACL
	if none.Changed() != nil {
		t.Error("a nil ACL (everything allowed) offers a channel that could close")
	}
}
