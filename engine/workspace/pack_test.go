package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A packed workspace holds exactly its shipped files, hashes to the
// revision Load gives it, packs to the same bytes twice, and is refused
// over its size limit.
func TestPackShipsTheRevisionsFilesAndHashesToIt(t *testing.T) {
	dir := writeWorkspace(t, map[string]string{
		".workflows/main.yaml": "tasks:\n  t:\n    flow:\n      s: {type: script, source: run.sh}\n",
		"run.sh":               "#!/bin/sh\necho hi\n",
		".git/HEAD":            "ref: refs/heads/main\n",
	})
	if err := os.Chmod(filepath.Join(dir, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := Load("ws", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var first, second bytes.Buffer
	rev, err := Pack(&first, dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if rev != ws.Revision {
		t.Errorf("packed revision %s, loaded %s", rev, ws.Revision)
	}
	if _, err := Pack(&second, dir, 1<<20); err != nil || !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Errorf("a second pack differs (err %v)", err)
	}
	zr, err := gzip.NewReader(&first)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	modes := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[h.Name] = h.Mode
	}
	want := map[string]int64{".workflows/main.yaml": 0o644, "run.sh": 0o755}
	if len(modes) != len(want) || modes["run.sh"] != 0o755 || modes[".workflows/main.yaml"] != 0o644 {
		t.Errorf("packed %v, want %v (no VCS metadata)", modes, want)
	}
	if _, err := Pack(io.Discard, dir, 20); !errors.Is(err, ErrTooBig) {
		t.Errorf("pack over the limit: %v, want ErrTooBig", err)
	}
}
