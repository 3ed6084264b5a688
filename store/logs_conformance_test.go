package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/logtest"
)

// logDir is a log directory: the file backend's storage.
type logDir string

func (d logDir) Open(t *testing.T) store.LogBackend {
	t.Helper()
	l, err := store.OpenLogs(string(d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func (d logDir) SetWritten(t *testing.T, jobID string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(string(d), jobID+".jsonl"), at, at); err != nil {
		t.Fatal(err)
	}
}

func TestLogFilesPassTheLogSuite(t *testing.T) {
	logtest.Run(t, logtest.Config{
		New: func(t *testing.T) logtest.Storage { return logDir(filepath.Join(t.TempDir(), "logs")) },
	})
}

// A legacy .log file answers every query like the JSONL file it matches,
// its last line without a newline too.
func TestLegacyLogFileReadsTailAndAfterLikeTheJSONL(t *testing.T) {
	dir := logDir(filepath.Join(t.TempDir(), "logs"))
	l := dir.Open(t)
	logtest.BigMixedLog(t, l, "j1")
	data, err := os.ReadFile(filepath.Join(string(dir), "j1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	legacy := strings.TrimSuffix(string(data), "\n")
	if err := os.WriteFile(filepath.Join(string(dir), "j2.log"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	logtest.CheckQueries(t, l, "j2", legacy)
	logtest.CheckBackfills(t, l, "j2", legacy)
}
