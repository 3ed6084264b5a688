package dump_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/dump"
	"github.com/appliance-sh/appliance/store/dump/dumptest"
)

// A populated bbolt server's dump imports into an empty one whose dump is
// the same, record for record.
func TestBboltRoundTrip(t *testing.T) {
	from := dumptest.Bbolt(t)
	dumptest.Populate(t, from)
	d := dumptest.RoundTrip(t, from, dumptest.Bbolt(t))
	for _, kind := range []string{dump.KindUser, dump.KindAuthLink, dump.KindAPIKey, dump.KindWorker, dump.KindJob, dump.KindStep,
		dump.KindLog, dump.KindLogMark, dump.KindFire, dump.KindEventMark, dump.KindConsumed, dump.KindSnapshot} {
		if !bytes.Contains(d, []byte(`{"kind":"`+kind+`"`)) {
			t.Errorf("the dump has no %s record", kind)
		}
	}
}

// An import refuses a store that holds records, and a dump that is cut
// short, damaged or of another version, writing nothing.
func TestImportRefusesWithoutWriting(t *testing.T) {
	from := dumptest.Bbolt(t)
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
		"newer":        []byte(strings.Replace(string(full), fmt.Sprintf(`"version":%d`, dump.Version), `"version":99`, 1)),
	} {
		to := dumptest.Bbolt(t)
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

// A version 1 dump (before log_mark records) still imports; its logs carry
// no marks.
func TestVersionOneDumpImports(t *testing.T) {
	from := dumptest.Bbolt(t)
	dumptest.Populate(t, from)
	var v1 strings.Builder
	records := 0
	for _, line := range strings.Split(strings.TrimSuffix(string(dumptest.Export(t, from)), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, `{"kind":"`+dump.KindHeader+`"`):
			v1.WriteString(strings.Replace(line, fmt.Sprintf(`"version":%d`, dump.Version), `"version":1`, 1) + "\n")
		case strings.HasPrefix(line, `{"kind":"`+dump.KindLogMark+`"`), strings.HasPrefix(line, `{"kind":"`+dump.KindEnd+`"`):
		default:
			v1.WriteString(line + "\n")
			records++
		}
	}
	fmt.Fprintf(&v1, `{"kind":"%s","data":{"records":%d}}`+"\n", dump.KindEnd, records)
	to := dumptest.Bbolt(t)
	if _, err := dump.Import(context.Background(), to, strings.NewReader(v1.String()), t.TempDir()); err != nil {
		t.Fatalf("import of a version 1 dump: %v", err)
	}
	if d := dumptest.Export(t, to); bytes.Contains(d, []byte(`{"kind":"`+dump.KindLogMark+`"`)) {
		t.Fatal("the import of a dump without marks has marks")
	}
}
