package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/app/config"
)

// SIGHUP's reload puts the config file's new acl section in force in the
// ACL the API holds; a file that does not load, or that would turn the
// ACL off or on, leaves the rules in force and says why.
// aclAuth is an auth section an acl section may follow.
const aclAuth = `auth:
  jwt_secret: 0123456789abcdef0123456789abcdef
  refresh_secret: 0123456789abcdef0123456789abcdef
  providers:
    local: {provider_type: internal}
`

func TestReloadACLReplacesTheRulesInForce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server-config.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(aclAuth + "acl:\n  rules:\n    - {workspace: main, tasks: [\"ops/*\"], action: run, groups: [devs]}\n")
	cfg, err := config.LoadServer(path)
	if err != nil {
		t.Fatal(err)
	}
	acl := cfg.Effective.ACL
	dev := &accounts.User{Email: "dev@example.com", Groups: []string{"devs"}}
	if got := acl.Permission(dev, "main", "ops/deploy"); got != accounts.Run {
		t.Fatalf("before the reload: %v, want run", got)
	}

	write(aclAuth + "acl:\n  rules:\n    - {workspace: main, tasks: [\"ops/*\"], action: view, groups: [devs]}\n")
	desc, err := reloadACL(path, acl)
	if err != nil || desc != "on, 1 rules, default deny" {
		t.Fatalf("reload = %q, %v", desc, err)
	}
	if got := acl.Permission(dev, "main", "ops/deploy"); got != accounts.View {
		t.Fatalf("after the reload: %v, want view", got)
	}

	for _, tt := range []struct{ name, body, want string }{
		{"broken file", aclAuth + "acl:\n  defualt: deny\n", `unknown field "defualt"`},
		{"acl removed", aclAuth, "removing the acl needs a restart"},
	} {
		write(tt.body)
		if _, err := reloadACL(path, acl); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "stays") {
			t.Errorf("%s: reload error %v, want one saying %q and that the acl in force stays", tt.name, err, tt.want)
		}
		if got := acl.Permission(dev, "main", "ops/deploy"); got != accounts.View {
			t.Errorf("%s: the refused reload changed the acl: %v", tt.name, got)
		}
	}
	write(aclAuth + "acl:\n  default: run\n")
	if _, err := reloadACL(path, nil); err == nil || !strings.Contains(err.Error(), "needs a restart") {
		t.Errorf("adding an acl to a server without one: %v", err)
	}
}
