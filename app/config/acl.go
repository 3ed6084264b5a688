package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/appliance-sh/appliance/accounts"
)

// ACL is the `acl` section of server-config.yaml (DESIGN.md
// "Authorization (ACL)"). It needs auth.
//
//	acl:
//	  default: deny            # deny | view | run, when no rule matches
//	  rules:
//	    - {workspace: "*", tasks: ["*"], action: run, groups: [devops]}
type ACL struct {
	Default *ACLAction `yaml:"default"`
	Rules   []ACLRule  `yaml:"rules"`
}

// ACLRule is one entry of acl.rules.
type ACLRule struct {
	Workspace string    `yaml:"workspace"`
	Tasks     []string  `yaml:"tasks"`
	Action    ACLAction `yaml:"action"`
	Groups    []string  `yaml:"groups"`
	Users     []string  `yaml:"users"`
}

// aclGroupName is the spec's group name rule (as the admin API checks it).
var aclGroupName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// positionedError is a config error found after decoding a node, at that
// node's place in the file.
type positionedError struct {
	line, col int
	msg       string
}

func (e *positionedError) Error() string { return fmt.Sprintf("%d:%d: %s", e.line, e.col, e.msg) }

func errorAt(node ast.Node, format string, args ...any) error {
	e := &positionedError{msg: fmt.Sprintf(format, args...)}
	if tk := node.GetToken(); tk != nil && tk.Position != nil {
		e.line, e.col = tk.Position.Line, tk.Position.Column
	}
	return e
}

// ACLAction is deny, view or run.
type ACLAction struct {
	Action accounts.Action
	Set    bool // written in the file
}

func (a *ACLAction) UnmarshalYAML(node ast.Node) error {
	var s string
	if err := yaml.NodeToValue(node, &s); err != nil {
		return err
	}
	act, err := accounts.ParseAction(s)
	if err != nil {
		return errorAt(node, "acl: %v", err)
	}
	*a = ACLAction{Action: act, Set: true}
	return nil
}

// aclRuleFields is a rule as written, decoded strictly.
type aclRuleFields ACLRule

// UnmarshalYAML decodes a rule and checks it, naming the rule's place.
func (r *ACLRule) UnmarshalYAML(node ast.Node) error {
	var f aclRuleFields
	if err := yaml.NodeToValue(node, &f, yaml.DisallowUnknownField()); err != nil {
		return err
	}
	switch {
	case f.Workspace == "":
		return errorAt(node, `acl rule: "workspace" is required (a name, or "*" for every workspace)`)
	case len(f.Tasks) == 0:
		return errorAt(node, `acl rule: "tasks" is required (task paths like "deploy/*", or ["*"] for every task)`)
	case !f.Action.Set:
		return errorAt(node, `acl rule: "action" is required (deny, view or run)`)
	case len(f.Groups) == 0 && len(f.Users) == 0:
		return errorAt(node, `acl rule: give "groups" or "users" (emails) it applies to`)
	}
	for _, g := range f.Groups {
		if !aclGroupName.MatchString(g) {
			return errorAt(node, "acl rule: invalid group name %q: use 1 to 64 letters, digits, _ or -", g)
		}
	}
	for _, u := range f.Users {
		if !strings.Contains(u, "@") {
			return errorAt(node, "acl rule: user %q is not an email address", u)
		}
	}
	*r = ACLRule(f)
	return nil
}

// Build checks the section against the rest of the config and returns the
// ACL the API enforces (nil without a section).
func (a *ACL) Build(auth *Auth) (*accounts.ACL, error) {
	if a == nil {
		return nil, nil
	}
	if auth == nil {
		return nil, errors.New("acl: needs auth: an ACL grants users permissions, so configure the auth section first")
	}
	acl := &accounts.ACL{Default: accounts.Deny}
	if a.Default != nil {
		acl.Default = a.Default.Action
	}
	for _, r := range a.Rules {
		acl.Rules = append(acl.Rules, accounts.ACLRule{
			Workspace: r.Workspace, Tasks: r.Tasks, Action: r.Action.Action, Groups: r.Groups, Users: r.Users,
		})
	}
	return acl, nil
}

// Describe is the start-up line of the ACL.
func (a *ACL) Describe() string {
	if a == nil {
		return "off (every user may run every task)"
	}
	def := accounts.Deny
	if a.Default != nil {
		def = a.Default.Action
	}
	return fmt.Sprintf("on, %d rules, default %s", len(a.Rules), def)
}
