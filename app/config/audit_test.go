package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The audit section: its key from the config or the environment, a key
// generated once into data_dir without either, and its limits.
func TestAuditSection(t *testing.T) {
	t.Setenv(AuditKeyEnv, "")
	if _, err := loadConfigText(t, "audit:\n  key: short\n"); err == nil || !strings.Contains(err.Error(), "audit.key: 5 bytes, want at least 16") {
		t.Errorf("a short key: %v", err)
	}
	if _, err := loadConfigText(t, "audit:\n  retention: forever\n"); err == nil || !strings.Contains(err.Error(), "audit.retention") {
		t.Errorf("a bad retention: %v", err)
	}
	cfg, err := loadConfigText(t, "audit:\n  key: 0123456789abcdef0123\n  retention: 720h\n")
	if err != nil {
		t.Fatal(err)
	}
	if k, gen, err := cfg.AuditKey(true); err != nil || gen || string(k) != "0123456789abcdef0123" || cfg.AuditRetention() != 720*time.Hour || cfg.Audit.HeadEvery != DefaultAuditHeadEvery {
		t.Errorf("configured key: %q %v %v, retention %s, head_every %d", k, gen, err, cfg.AuditRetention(), cfg.Audit.HeadEvery)
	}
	t.Setenv(AuditKeyEnv, "from-the-environment-0123")
	if cfg, err = loadConfigText(t, ""); err != nil || cfg.Audit.Key != "from-the-environment-0123" {
		t.Errorf("key from the environment: %q, %v", cfg.Audit.Key, err)
	}
	t.Setenv(AuditKeyEnv, "")
	cfg, err = loadConfigText(t, "data_dir: "+t.TempDir()+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cfg.AuditKey(false); err == nil {
		t.Error("a command that must not make a key made one")
	}
	k1, gen, err := cfg.AuditKey(true)
	if err != nil || !gen || len(k1) != 64 {
		t.Fatalf("generated key: %d bytes, %v, %v", len(k1), gen, err)
	}
	if fi, err := os.Stat(cfg.AuditKeyFile()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, %v", fi, err)
	}
	if k2, gen, err := cfg.AuditKey(true); err != nil || gen || string(k2) != string(k1) {
		t.Errorf("the second start: %v %v, want the same key", gen, err)
	}
}
