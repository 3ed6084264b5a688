package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// writeConfig writes a server config file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server-config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// postgresConfig is a config on the database of dsn, given through the
// environment as the README shows.
func postgresConfig(t *testing.T, dsn string) string {
	t.Helper()
	t.Setenv("APPLIANCE_DATABASE_URL", dsn)
	return writeConfig(t, "data_dir: "+t.TempDir()+"\nstorage:\n  type: postgres\n  dsn: ${APPLIANCE_DATABASE_URL}\n")
}

func schemaOf(t *testing.T, dsn string) postgres.Plan {
	t.Helper()
	p, err := postgres.PlanMigrations(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A dry run lists every migration an empty database lacks and changes
// nothing; migrate then applies them, and a second run has nothing to do.
func TestMigrateDryRunChangesNothingThenMigrateApplies(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := postgresConfig(t, dsn)
	all, err := postgres.Migrations()
	if err != nil || len(all) == 0 {
		t.Fatalf("the binary's migrations: %v, %v", all, err)
	}

	code, out, errOut := runMain("migrate", "--config", cfg, "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d, stderr %s", code, errOut)
	}
	for _, m := range all {
		if !strings.Contains(out, "  "+m.Name+"\n") {
			t.Errorf("dry run does not list %s:\n%s", m.Name, out)
		}
	}
	if !strings.Contains(out, "dry run: nothing was changed") {
		t.Errorf("dry run output:\n%s", out)
	}
	if p := schemaOf(t, dsn); p.Current != 0 || len(p.Pending) != len(all) {
		t.Fatalf("after a dry run the database is at %d with %d pending, want 0 and %d", p.Current, len(p.Pending), len(all))
	}

	code, out, errOut = runMain("migrate", "--config", cfg)
	if code != 0 {
		t.Fatalf("migrate: exit %d, stderr %s", code, errOut)
	}
	p := schemaOf(t, dsn)
	if p.Current != len(all) || len(p.Pending) != 0 {
		t.Fatalf("after migrate the database is at %d with %d pending, want %d and none", p.Current, len(p.Pending), len(all))
	}
	if !strings.Contains(out, fmt.Sprintf("now at schema version %d (it was at 0)", len(all))) || !strings.Contains(out, all[0].Name) {
		t.Fatalf("migrate output:\n%s", out)
	}

	for _, args := range [][]string{{"--dry-run"}, nil} {
		code, out, errOut = runMain(append([]string{"migrate", "--config", cfg}, args...)...)
		if code != 0 || !strings.Contains(out, "nothing to apply") {
			t.Fatalf("migrate %v on an up-to-date database: exit %d, stdout %s, stderr %s", args, code, out, errOut)
		}
	}
}

// On bbolt there is no schema to migrate, and migrate creates no file.
func TestMigrateOnBboltHasNothingToDo(t *testing.T) {
	data := t.TempDir()
	cfg := writeConfig(t, "data_dir: "+data+"\n")
	code, out, errOut := runMain("migrate", "--config", cfg, "--dry-run")
	if code != 0 || !strings.Contains(out, "storage.type is bbolt") || !strings.Contains(out, "nothing to migrate") {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Fatalf("migrate on bbolt wrote to data_dir: %v", entries)
	}
}

// A database that cannot be reached fails migrate with exit 1, naming
// the server and the cause, never the password; bad usage is exit 2.
func TestMigrateErrors(t *testing.T) {
	const secret = "hunter2-migrate"
	cfg := postgresConfig(t, "postgres://app:"+secret+"@127.0.0.1:1/appliance?sslmode=disable&connect_timeout=5")
	code, out, errOut := runMain("migrate", "--config", cfg, "--dry-run")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:1") || !strings.Contains(errOut, "refused") || strings.Contains(errOut+out, secret) {
		t.Fatalf("unreachable: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	bad := writeConfig(t, "storage:\n  type: sqlite\n")
	if code, _, errOut := runMain("migrate", "--config", bad); code != 2 || !strings.Contains(errOut, bad+":2:9: storage.type") {
		t.Fatalf("bad config: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runMain("migrate", "--config", bad, "now"); code != 2 || !strings.Contains(errOut, `unexpected argument "now"`) {
		t.Fatalf("extra argument: exit %d, stderr %q", code, errOut)
	}
}
