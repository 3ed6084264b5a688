package runners

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzExtractTarGz unpacks arbitrary bytes as a workspace archive next to a
// sibling directory holding a file: whatever the archive says (.., absolute
// paths, symlinks, links through symlinks), nothing may be created or
// changed outside the destination, and an archive that extracts must leave
// no symlink resolving outside it.
//
// Input starting with the gzip magic is the archive as is; anything else is
// taken as a bare tar stream and gzipped first, since mutations of
// compressed bytes almost never reach the tar reader.
func FuzzExtractTarGz(f *testing.F) {
	for _, entries := range [][]tarEntry{
		{{name: "a.txt", body: "hello"}},
		{{name: "dir/", typ: tar.TypeDir}, {name: "dir/run.sh", body: "#!/bin/sh\n", mode: 0o755}},
		{{name: "../escape", body: "x"}},
		{{name: "a/../../escape", body: "x"}},
		{{name: "/etc/escape", body: "x"}},
		{{name: "link", typ: tar.TypeSymlink, link: "../outside"}, {name: "link/owned", body: "x"}},
		{{name: "link", typ: tar.TypeSymlink, link: "/tmp"}},
		{{name: "a", typ: tar.TypeSymlink, link: "."}, {name: "b", typ: tar.TypeSymlink, link: "a/x/../.."}},
		{{name: "d/", typ: tar.TypeDir}, {name: "d/l", typ: tar.TypeSymlink, link: ".."}, {name: "d/l/l2", typ: tar.TypeSymlink, link: ".."}},
		{{name: "hard", typ: tar.TypeLink, link: "../outside/keep"}},
		{{name: "same", body: "1"}, {name: "same", body: "2"}},
		{{name: "fifo", typ: tar.TypeFifo}, {name: "./", typ: tar.TypeDir}, {name: "", body: "x"}},
	} {
		gz := tarball(f, entries...)
		f.Add(gz)
		f.Add(gunzip(f, gz))
	}
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		defer time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("archive %q: no result after 10s", data)) }).Stop()
		parent := t.TempDir()
		outside := filepath.Join(parent, "outside")
		if err := os.Mkdir(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		dest := filepath.Join(parent, "dest")
		if err := os.Mkdir(dest, 0o755); err != nil {
			t.Fatal(err)
		}

		archive := data
		if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(data)
			zw.Close()
			archive = buf.Bytes()
		}
		err := extractTarGz(bytes.NewReader(archive), dest)

		var found []string
		walkErr := filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(parent, p)
			if rel != "." && rel != "dest" && !strings.HasPrefix(rel, "dest"+string(filepath.Separator)) {
				found = append(found, filepath.ToSlash(rel))
			}
			return nil
		})
		if walkErr != nil {
			t.Fatal(walkErr)
		}
		if strings.Join(found, ",") != "outside,outside/keep" {
			t.Fatalf("extraction (err %v) created outside the destination: %v", err, found)
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "keep")); string(b) != "keep" {
			t.Fatalf("extraction (err %v) changed a file outside the destination: %q", err, b)
		}
		if /* on failure the caller removes dest */ err != nil {
			return
		}
		realDest, _ := filepath.EvalSymlinks(dest)
		_ = filepath.WalkDir(dest, func(p string, d fs.DirEntry, _ error) error {
			if d == nil || d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			to, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling
			}
			if rel, _ := filepath.Rel(realDest, to); rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Fatalf("symlink %s resolves outside the destination, to %s", p, to)
			}
			return nil
		})
	})
}

func gunzip(t testing.TB, data []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
