package app

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// Until every part of the state can live in PostgreSQL, a server on it
// connects and migrates, then refuses to start, saying so, with no bbolt
// file made in data_dir as a fallback (TODO(pg-integration) 4: this test
// becomes a server serving a job on PostgreSQL).
func TestPostgresStorageIsRefusedUntilComplete(t *testing.T) {
	dsn := pgtest.DSN(t)
	data := filepath.Join(t.TempDir(), "data")
	cfg := postgresConfig(t, dsn)
	var stdout, stderr bytes.Buffer
	code := runServe([]string{"--config", cfg, "--data-dir", data, "--listen", "127.0.0.1:0", "--workspace", "../examples", "--workers", "0"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), errPostgresIncomplete.Error()) || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if p := schemaOf(t, dsn); len(p.Pending) != 0 || p.Current == 0 {
		t.Fatalf("the database was not migrated: at %d, %d pending", p.Current, len(p.Pending))
	}
	if _, err := os.Stat(filepath.Join(data, "appliance.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a bbolt file was made: %v", err)
	}
}

// The settings printed at start-up say where the state is, never the DSN.
func TestSettingsNameTheStorage(t *testing.T) {
	t.Setenv("APPLIANCE_DATABASE_URL", "postgres://app:pw-in-dsn@db.example.com/appliance")
	for _, tc := range []struct{ yaml, want string }{
		{"data_dir: /srv/d\n", "storage:               bbolt, " + filepath.Join("/srv/d", "appliance.db")},
		{"storage: {type: postgres, dsn: \"${APPLIANCE_DATABASE_URL}\", max_conns: 4}\n", "storage:               postgres (pool of 4 connections)"},
	} {
		cfg, err := config.LoadServer(writeConfig(t, tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		printSettings(&out, cfg, "127.0.0.1:1", nil, 0)
		if !strings.Contains(out.String(), tc.want) || strings.Contains(out.String(), "pw-in-dsn") {
			t.Fatalf("settings:\n%s\nwant a line %q and no password", out.String(), tc.want)
		}
	}
}
