package store_test

import (
	"os"
	"path/filepath"
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
