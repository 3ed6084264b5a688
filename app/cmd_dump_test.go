package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/store/dump"
	"github.com/appliance-sh/appliance/store/dump/dumptest"
)

// populated fills the storage of a config with one of every record.
func populated(t *testing.T, cfgPath string) {
	t.Helper()
	cfg, err := config.LoadServer(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := withDumpSources(context.Background(), cfg, func(_ context.Context, src dump.Sources) error {
		dumptest.Populate(t, src)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// exportOf runs appliance export on a config and returns the dump.
func exportOf(t *testing.T, cfgPath string) []byte {
	t.Helper()
	code, out, errOut := runMain("export", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	return []byte(out)
}

// importInto runs appliance import of a dump into a config's storage.
func importInto(t *testing.T, cfgPath string, d []byte) (int, string) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "dump.jsonl")
	if err := os.WriteFile(in, d, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runMain("import", "--config", cfgPath, "--in", in)
	return code, errOut
}

func bboltConfig(t *testing.T) string {
	return writeConfig(t, "data_dir: "+t.TempDir()+"\n")
}

// export and import move a server's state to another one exactly, and
// import refuses a store that has records.
func TestExportThenImportMovesEverything(t *testing.T) {
	from, to := bboltConfig(t), bboltConfig(t)
	populated(t, from)
	d := exportOf(t, from)
	if code, errOut := importInto(t, to, d); code != 0 {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	dumptest.SameExceptTime(t, d, exportOf(t, to))
	code, errOut := importInto(t, from, d)
	if code != 1 || !strings.Contains(errOut, "not empty") {
		t.Fatalf("import into a populated store: exit %d: %s", code, errOut)
	}
}
