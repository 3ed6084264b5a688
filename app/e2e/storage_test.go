package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `appliance serve` on a PostgreSQL it cannot reach exits 1 with a
// message naming the server and the cause, never the password, without
// a panic and without falling back to a bbolt file in data_dir.
func TestStorageUnreachableDatabaseStopsServe(t *testing.T) {
	bin := binary(t)
	const secret = "pa55-never-shown"
	for _, dsn := range []string{
		"postgres://appliance:" + secret + "@127.0.0.1:1/appliance?sslmode=disable&connect_timeout=10",
		"host=127.0.0.1 port=1 user=appliance password=" + secret + " dbname=appliance sslmode=disable connect_timeout=10",
	} {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		cfg := filepath.Join(dir, "server-config.yaml")
		body := "listen: 127.0.0.1:0\ndata_dir: " + data + "\nworkers: 0\nstorage:\n  type: postgres\n  dsn: ${APPLIANCE_DATABASE_URL}\n"
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfg, "--workspace", "../../examples")
		cmd.Env = append(os.Environ(), "APPLIANCE_DATABASE_URL="+dsn)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("%s: serve ended with %v, want exit 1; stderr:\n%s", dsn, err, stderr.String())
		}
		out := stdout.String() + stderr.String()
		for _, want := range []string{"appliance serve: storage: PostgreSQL at 127.0.0.1:1", `user "appliance"`, "connection refused"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
			}
		}
		for _, never := range []string{secret, "panic", "goroutine ", "serving on"} {
			if strings.Contains(out, never) {
				t.Errorf("output shows %q:\n%s", never, out)
			}
		}
		if _, err := os.Stat(filepath.Join(data, "appliance.db")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a bbolt file was made in data_dir: %v", err)
		}
	}
}
