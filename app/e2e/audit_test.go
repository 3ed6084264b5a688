package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/audit"
)

// The journey of the audit trail on a real server: sign-ins (one
// failed) and an execute are recorded; the CLI lists and exports the
// trail and verifies it through the API and in the export; the server
// logs the chain's head at shutdown; `audit verify --config` checks the
// stopped server's store against that head, and a head the store does
// not reach is named as entries missing at the end.
func TestAuditTrailFromRequestToVerify(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, "tasks:\n  hi:\n    flow:\n      s: {type: script, script: echo hi}\n")
	cfg := testServerConfig(t, map[string]string{"main": ws}, 0, withAuth)
	var serverLog syncBuffer
	srv, err := startServer(context.Background(), cfg, slog.New(slog.NewTextHandler(&serverLog, nil)))
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + srv.Addr()
	keyFile := filepath.Join(cfg.DataDir, "audit.key")
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the generated key file: %v, %v", fi, err)
	}
	if !strings.Contains(serverLog.String(), "no audit.key configured") {
		t.Errorf("no warning about the generated key in the log:\n%s", serverLog.String())
	}

	if code := do(t, "POST", url+"/api/auth/login", map[string]string{"email": "admin@example.com", "password": "nope"}, nil); code != 401 {
		t.Fatalf("bad login: %d", code)
	}
	token := loginToken(t, url, "first-password")
	var created map[string]any
	if code := doAuthBody(t, "POST", url+"/api/workspaces/main/tasks/hi/execute", token, map[string]any{}, &created); code != 200 {
		t.Fatalf("execute: %d", code)
	}
	t.Setenv("APPLIANCE_TOKEN", token)

	var list string
	waitUntil(t, "the failed sign-in to be committed", func() bool {
		code, out, errOut := runMain("audit", "list", "--server", url)
		if code != 0 {
			t.Fatalf("audit list: %d %s", code, errOut)
		}
		list = out
		return strings.Contains(out, "failed (invalid email or password)")
	})
	for _, want := range []string{"auth.sign_in", "job.execute", "job/" + created["job_id"].(string), "admin@example.com", "127.0.0.1"} {
		if !strings.Contains(list, want) {
			t.Errorf("audit list lacks %q:\n%s", want, list)
		}
	}
	code, export, errOut := runMain("audit", "export", "--server", url)
	if code != 0 || strings.Count(export, "\n") < 3 {
		t.Fatalf("audit export: %d %s\n%s", code, errOut, export)
	}
	exportFile := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(exportFile, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runMain("audit", "verify", "--file", exportFile, "--key-file", keyFile); code != 0 {
		t.Fatalf("verify the export: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runMain("audit", "verify", "--server", url, "--key-file", keyFile); code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("verify through the API: %d %s %s", code, out, errOut)
	}
	// An export edited by hand is refused, naming the entry.
	edited := strings.Replace(export, "admin@example.com", "eve@example.com", 1)
	if err := os.WriteFile(exportFile, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runMain("audit", "verify", "--file", exportFile, "--key-file", keyFile); code != 1 || !strings.Contains(errOut, "changed") {
		t.Fatalf("verify an edited export: %d %s", code, errOut)
	}

	// A refusal right before the shutdown (its entry queued, not yet
	// committed, maybe) is in the last commit, under the head logged.
	lines := strings.Split(strings.TrimSpace(export), "\n")
	var last audit.Entry
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if code := do(t, "POST", url+"/api/auth/login", map[string]string{"email": "admin@example.com", "password": "late"}, nil); code != 401 {
		t.Fatalf("bad login: %d", code)
	}
	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`audit chain head".*? seq=(\d+) mac=([0-9a-f]{64}) why=shutdown`).FindStringSubmatch(serverLog.String())
	if m == nil {
		t.Fatalf("no head logged at shutdown:\n%s", serverLog.String())
	}
	seq, _ := strconv.Atoi(m[1])
	if int64(seq) != last.Seq+1 {
		t.Fatalf("head logged at shutdown %d, want %d: the failed sign-in before the shutdown was not committed", seq, last.Seq+1)
	}
	cfgFile := filepath.Join(t.TempDir(), "server-config.yaml")
	if err := os.WriteFile(cfgFile, []byte("data_dir: "+cfg.DataDir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runMain("audit", "verify", "--config", cfgFile, "--head", m[1]+":"+m[2]); code != 0 {
		t.Fatalf("verify the stopped server's store: %d %s %s", code, out, errOut)
	}
	later := audit.Head{Seq: int64(seq + 2), MAC: m[2]}
	code, _, errOut = runMain("audit", "verify", "--config", cfgFile, "--head", later.String())
	if want := fmt.Sprintf("audit entry %d: missing at the end", seq+1); code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("verify against a head the store does not reach: %d %s, want %q", code, errOut, want)
	}
}
