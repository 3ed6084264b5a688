package dump_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/dump"
	"github.com/appliance-sh/appliance/store/dump/dumptest"
)

// bboltSources opens a bbolt store, its log files and its snapshots in a
// new folder.
func bboltSources(t *testing.T) dump.Sources {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "appliance.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	logs, err := store.OpenLogs(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	snaps, err := store.OpenSnapshots(filepath.Join(dir, "snapshots"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return dump.Sources{Store: db, Logs: logs, Snapshots: snaps}
}

// A populated bbolt server's dump imports into an empty one whose dump is
// the same, record for record.
func TestBboltRoundTrip(t *testing.T) {
	from := bboltSources(t)
	dumptest.Populate(t, from)
	d := dumptest.RoundTrip(t, from, bboltSources(t))
	for _, kind := range []string{dump.KindUser, dump.KindAuthLink, dump.KindAPIKey, dump.KindWorker, dump.KindJob, dump.KindStep,
		dump.KindLog, dump.KindFire, dump.KindEventMark, dump.KindConsumed, dump.KindSnapshot} {
		if !bytes.Contains(d, []byte(`{"kind":"`+kind+`"`)) {
			t.Errorf("the dump has no %s record", kind)
		}
	}
}

// An import refuses a store that holds records, and a dump that is cut
// short, damaged or of another version, writing nothing.
func TestImportRefusesWithoutWriting(t *testing.T) {
	from := bboltSources(t)
	dumptest.Populate(t, from)
	full := dumptest.Export(t, from)
	if _, err := dump.Import(context.Background(), from, bytes.NewReader(full), t.TempDir()); !errors.Is(err, dump.ErrNotEmpty) {
		t.Fatalf("import into a populated store: %v", err)
	}
	cut := full[:bytes.LastIndex(full[:len(full)-1], []byte("\n"))+1]
	for name, bad := range map[string][]byte{
		"empty":        nil,
		"cut short":    cut,
		"no header":    full[bytes.IndexByte(full, '\n')+1:],
		"garbage line": append(append([]byte{}, cut...), []byte("{not json\n")...),
		"newer":        []byte(strings.Replace(string(full), `"version":1`, `"version":99`, 1)),
	} {
		to := bboltSources(t)
		_, err := dump.Import(context.Background(), to, bytes.NewReader(bad), t.TempDir())
		if !errors.Is(err, dump.ErrBadDump) {
			t.Fatalf("%s: %v", name, err)
		}
		_, users, _ := to.Store.Users(context.Background(), 1, 0)
		_, jobs, _ := to.Store.Jobs(context.Background(), engine.JobFilter{Limit: 1})
		if users+jobs != 0 {
			t.Fatalf("%s: the refused import wrote %d users and %d jobs", name, users, jobs)
		}
	}
}
