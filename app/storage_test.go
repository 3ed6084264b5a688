package app

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/app/config"
)

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
