package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeConfigFileExpandsEnvAndRejectsUnknownKeys(t *testing.T) {
	type cfg struct {
		Listen string `yaml:"listen"`
		Token  string `yaml:"worker_token"`
	}
	dir := t.TempDir()
	t.Setenv("APPLIANCE_TEST_TOKEN", "s3cret")

	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("listen: 127.0.0.1:9\nworker_token: ${APPLIANCE_TEST_TOKEN}\n"), 0o600)
	var c cfg
	if err := decodeConfigFile(good, &c); err != nil {
		t.Fatal(err)
	}
	if c.Token != "s3cret" || c.Listen != "127.0.0.1:9" {
		t.Fatalf("decoded %+v", c)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listen: x\nlisten_port: 9\n"), 0o600)
	err := decodeConfigFile(bad, &c)
	if err == nil || !strings.HasPrefix(err.Error(), bad+":2:1: ") || !strings.Contains(err.Error(), "listen_port") {
		t.Fatalf("want %s:2:1 unknown field error, got %v", bad, err)
	}
}
