package worker

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
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
// The limits are small, so the fuzzer reaches them: whatever the archive,
// the files written never exceed them, and a bomb (its seeds below) stops
// at the ratio limit.
//
// Input starting with the gzip magic is the archive as is; anything else is
// taken as a bare tar stream and gzipped first, since mutations of
// compressed bytes almost never reach the tar reader.
func FuzzExtractTarGz(f *testing.F) {
	lim := fuzzLimits
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
	for _, seed := range bombSeeds(f) {
		f.Add(seed.archive)
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
		err := extractTarGz(bytes.NewReader(archive), dest, lim)
		if err != nil && errors.Is(err, ErrWorkspaceLimit) != strings.Contains(err.Error(), "exceeds workspace_limits.") {
			t.Fatalf("error %q: a limit's error must name it, and only a limit's", err)
		}
		written, entries, biggest := onDisk(t, dest)
		if written > lim.TotalSize || biggest > lim.FileSize || entries > lim.Files {
			t.Fatalf("extraction (err %v) wrote %d bytes in %d entries, the biggest %d bytes; limits %+v", err, written, entries, biggest, lim)
		}
		// The ratio bounds what was unpacked, so what was written: by the
		// whole archive's size, plus the floor and one read past it.
		if most := max(lim.RatioFloor, lim.Ratio*int64(len(archive)+1)) + 32<<10; written > most {
			t.Fatalf("extraction (err %v) wrote %d bytes from a %d-byte archive; the ratio limit allows %d", err, written, len(archive), most)
		}

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

// fuzzLimits are small, for the fuzzer to reach.
var fuzzLimits = WorkspaceLimits{TotalSize: 16 << 10, Files: 32, FileSize: 8 << 10, Ratio: 50, RatioFloor: 4 << 10}

// bombSeeds are small archives each tripping one of fuzzLimits, named.
func bombSeeds(t testing.TB) []struct {
	want    string
	archive []byte
} {
	rnd := rand.NewChaCha8([32]byte{})
	text := func(n int) string { // printable, and gzip cannot shrink it much
		b := make([]byte, n)
		rnd.Read(b)
		for i := range b {
			b[i] = 'a' + b[i]%26
		}
		return string(b)
	}
	files := func(n int, body string) (out []tarEntry) {
		for i := range n {
			out = append(out, tarEntry{name: fmt.Sprintf("d%d/f%d", i%3, i), body: body})
		}
		return out
	}
	return []struct {
		want    string
		archive []byte
	}{
		{"total_size (16KB)", tarball(t, files(3, text(6<<10))...)},
		{"file_size (8KB)", tarball(t, tarEntry{name: "big", body: text(10 << 10)})},
		{"files (32)", tarball(t, files(40, "")...)},
		{"files (32)", tarball(t, tarEntry{name: strings.Repeat("d/", 40) + "f"})}, // in implied directories
		{"ratio (50:1)", tarball(t, files(3, strings.Repeat("\x00", 6<<10))...)},
		{"file_size (8KB)", hugeHeaderBomb(t)},
	}
}

func TestFuzzSeedBombsTripTheirLimits(t *testing.T) {
	for _, seed := range bombSeeds(t) {
		err := extractTarGz(bytes.NewReader(seed.archive), t.TempDir(), fuzzLimits)
		if want := "workspace tarball exceeds workspace_limits." + seed.want; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("seed for %s: got %v", seed.want, err)
		}
	}
}

// hugeHeaderBomb is a gzip tarball whose one file claims 1GB and holds
// zeros, cut after 64KB of them.
func hugeHeaderBomb(t testing.TB) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "bomb", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	tw.Write(make([]byte, 64<<10))
	gz.Close() // not tw: the archive is cut short
	return buf.Bytes()
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
