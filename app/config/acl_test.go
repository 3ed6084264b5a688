package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/accounts"
)

const aclAuth = `auth:
  jwt_secret: 0123456789abcdef0123456789abcdef
  refresh_secret: 0123456789abcdef0123456789abcdef
  providers:
    local: {provider_type: internal}
`

func loadACLConfig(t *testing.T, body string) (*Server, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server-config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return LoadServer(path)
}

func TestACLConfigBuildsTheRules(t *testing.T) {
	cfg, err := loadACLConfig(t, aclAuth+`acl:
  default: view
  rules:
    - {workspace: "*", tasks: ["*"], action: run, groups: [devops]}
    - {workspace: production, tasks: ["deploy/*"], action: view, groups: [engineering], users: [contractor@ext.com]}
`)
	if err != nil {
		t.Fatal(err)
	}
	acl := cfg.Effective.ACL
	if acl == nil || acl.Default != accounts.View || len(acl.Rules) != 2 {
		t.Fatalf("acl = %+v", acl)
	}
	r := acl.Rules[1]
	if r.Workspace != "production" || r.Tasks[0] != "deploy/*" || r.Action != accounts.View || r.Users[0] != "contractor@ext.com" || r.Groups[0] != "engineering" {
		t.Fatalf("rule 2 = %+v", r)
	}
	// No default: deny.
	cfg, err = loadACLConfig(t, aclAuth+"acl:\n  rules: []\n")
	if err != nil || cfg.Effective.ACL.Default != accounts.Deny {
		t.Fatalf("no default: %+v, %v", cfg, err)
	}
	// No section: no ACL.
	if cfg, err := loadACLConfig(t, aclAuth); err != nil || cfg.Effective.ACL != nil {
		t.Fatalf("no section: %v, %v", cfg.Effective.ACL, err)
	}
}

func TestACLConfigErrorsNameTheLine(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"needs auth", "acl:\n  default: deny\n", "acl: needs auth"},
		{"unknown key in section", aclAuth + "acl:\n  defualt: deny\n", ":7:3: unknown field \"defualt\""},
		{"unknown key in rule", aclAuth + "acl:\n  rules:\n    - {workspace: w, tasks: [t], action: run, group: [x]}\n", ":8:47: unknown field \"group\""},
		{"bad action", aclAuth + "acl:\n  rules:\n    - workspace: w\n      tasks: [t]\n      action: execute\n      groups: [x]\n", `:10:15: acl: unknown action "execute" (deny, view or run)`},
		{"bad default", aclAuth + "acl:\n  default: allow\n", `:7:12: acl: unknown action "allow"`},
		{"no workspace", aclAuth + "acl:\n  rules:\n    - {tasks: [t], action: run, groups: [x]}\n", `:8:7: acl rule: "workspace" is required`},
		{"no tasks", aclAuth + "acl:\n  rules:\n    - {workspace: w, action: run, groups: [x]}\n", `"tasks" is required`},
		{"no action", aclAuth + "acl:\n  rules:\n    - {workspace: w, tasks: [t], groups: [x]}\n", `"action" is required`},
		{"nobody", aclAuth + "acl:\n  rules:\n    - {workspace: w, tasks: [t], action: run}\n", `give "groups" or "users"`},
		{"bad group", aclAuth + "acl:\n  rules:\n    - {workspace: w, tasks: [t], action: run, groups: [a b]}\n", `invalid group name "a b"`},
		{"bad user", aclAuth + "acl:\n  rules:\n    - {workspace: w, tasks: [t], action: run, users: [bob]}\n", `user "bob" is not an email`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadACLConfig(t, tt.yaml)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
