package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadStorageConfig(t *testing.T, body string) (*Server, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server-config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadServer(path)
	return cfg, path, err
}

func TestStorageDefaultsToBboltWithoutASection(t *testing.T) {
	for _, body := range []string{"", "listen: 127.0.0.1:9\n", "storage: {}\n", "storage:\n"} {
		cfg, _, err := loadStorageConfig(t, body)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if cfg.Storage.Type != StorageBbolt || cfg.Storage.Postgres() || cfg.Storage.DSN != "" {
			t.Fatalf("%q: storage = %+v, want bbolt", body, cfg.Storage)
		}
	}
}

func TestStoragePostgresTakesTheDSNFromTheEnvironment(t *testing.T) {
	const dsn = "postgres://app:pw@db.example.com:5432/appliance?sslmode=require"
	t.Setenv("APPLIANCE_DATABASE_URL", dsn)
	cfg, _, err := loadStorageConfig(t, "storage:\n  type: postgres\n  dsn: ${APPLIANCE_DATABASE_URL}\n")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Storage.Postgres() || cfg.Storage.DSN != dsn || cfg.Storage.EffectiveMaxConns() != DefaultMaxConns {
		t.Fatalf("storage = %+v", cfg.Storage)
	}
	if d := cfg.Storage.Describe(cfg.DBPath()); strings.Contains(d, "pw") || !strings.Contains(d, "postgres") {
		t.Fatalf("describe shows %q", d)
	}
	cfg, _, err = loadStorageConfig(t, "storage: {type: postgres, dsn: \"${APPLIANCE_DATABASE_URL}\", max_conns: 25}\n")
	if err != nil || cfg.Storage.EffectiveMaxConns() != 25 || cfg.Storage.DSN != dsn {
		t.Fatalf("flow style: %+v, %v", cfg.Storage, err)
	}
}

func TestStorageErrorsNameTheLine(t *testing.T) {
	t.Setenv("APPLIANCE_EMPTY_URL", "")
	for _, tt := range []struct{ name, yaml, want string }{
		{"unknown type", "listen: x\nstorage:\n  type: mysql\n", `:3:9: storage.type: unknown type "mysql"; want bbolt (the default) or postgres`},
		{"empty type", "storage:\n  type: \"\"\n", `:2:9: storage.type: empty`},
		{"postgres without dsn", "storage:\n  type: postgres\n", `:2:9: storage.dsn: required with type postgres`},
		{"postgres with an empty variable", "storage:\n  type: postgres\n  dsn: ${APPLIANCE_EMPTY_URL}\n", `:3:8: storage.dsn: required with type postgres`},
		{"unset variable", "storage:\n  type: postgres\n  dsn: ${APPLIANCE_UNSET_URL_FOR_TEST}\n", `:3:8: environment variable APPLIANCE_UNSET_URL_FOR_TEST is not set`},
		{"max_conns zero", "storage:\n  type: postgres\n  dsn: postgres://h/db\n  max_conns: 0\n", `:4:14: storage.max_conns: must be 1 or more, got 0`},
		{"max_conns negative", "storage: {type: postgres, dsn: postgres://h/db, max_conns: -3}\n", `storage.max_conns: must be 1 or more, got -3`},
		{"max_conns not a number", "storage:\n  type: postgres\n  dsn: postgres://h/db\n  max_conns: many\n", `:4:14: `},
		{"dsn with bbolt", "storage:\n  dsn: postgres://h/db\n", `:2:8: storage.dsn: set, but storage.type is bbolt`},
		{"max_conns with bbolt", "storage:\n  type: bbolt\n  max_conns: 4\n", `:3:14: storage.max_conns: a PostgreSQL setting`},
		{"unknown key", "storage:\n  type: postgres\n  url: postgres://h/db\n", `:3:3: unknown field "url"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := loadStorageConfig(t, tt.yaml)
			if err == nil || !strings.HasPrefix(err.Error(), path+":") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %s...%q", err, path, tt.want)
			}
		})
	}
}
