package worker

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// zeros is an endless stream of zero bytes: the stuff of gzip bombs.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// noise is incompressible bytes, so the ratio limit stays out of a test
// about another one.
func noise(n int64) io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{}), n) }

// bombFile is one regular entry of a streamed archive.
type bombFile struct {
	name string
	size int64
	data io.Reader // size bytes; nil for zeros
}

// bombStream is a gzip tarball written only as fast as it is read, so a
// bomb of gigabytes costs the test what the extractor reads of it, not
// what it claims to hold. sent counts the gzip bytes handed out.
type bombStream struct {
	pr   *io.PipeReader
	sent atomic.Int64
}

func newBombStream(t testing.TB, files func(yield func(bombFile) bool)) *bombStream {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		gz := gzip.NewWriter(pw)
		tw := tar.NewWriter(gz)
		var err error
		for f := range files {
			if err = tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: f.size}); err != nil {
				break
			}
			data := f.data
			if data == nil {
				data = zeros{}
			}
			if _, err = io.CopyN(tw, data, f.size); err != nil {
				break
			}
		}
		if err == nil {
			err = tw.Close()
		}
		if err == nil {
			err = gz.Close()
		}
		pw.CloseWithError(err)
	}()
	// The extractor stops reading at a limit: closing our end unblocks the
	// writer, which then stops.
	t.Cleanup(func() { pr.Close(); <-done })
	return &bombStream{pr: pr}
}

func (b *bombStream) Read(p []byte) (int, error) {
	n, err := b.pr.Read(p)
	b.sent.Add(int64(n))
	return n, err
}

// oneFile is an archive of a single file.
func oneFile(f bombFile) func(func(bombFile) bool) {
	return func(yield func(bombFile) bool) { yield(f) }
}

// manyFiles is an archive of n files made by mk.
func manyFiles(n int, mk func(i int) bombFile) func(func(bombFile) bool) {
	return func(yield func(bombFile) bool) {
		for i := range n {
			if !yield(mk(i)) {
				return
			}
		}
	}
}

// onDisk is what an extraction left in dir: bytes of regular files,
// entries, and the biggest file.
func onDisk(t testing.TB, dir string) (bytes, entries, biggest int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		entries++
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			bytes += fi.Size()
			biggest = max(biggest, fi.Size())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bytes, entries, biggest
}

// noRatio switches the ratio limit off in effect, for tests of the others.
const noRatio = 1 << 40

func TestWorkspaceBombsAreRefusedBeforeTheyFillTheDisk(t *testing.T) {
	const copyBuffer = 32 << 10 // io.Copy's: what one write may add past a check
	for _, tc := range []struct {
		name  string
		lim   WorkspaceLimits
		files func(func(bombFile) bool)
		want  string
		// maxWritten bounds the bytes on disk when refused; maxEntries the entries.
		maxWritten, maxEntries int64
	}{
		{
			name:  "one 8GB file of zeros, default limits",
			files: oneFile(bombFile{name: "bomb", size: 8 << 30}),
			want:  "workspace_limits.file_size (512MB)", maxWritten: 0, maxEntries: 0,
		},
		{
			name:  "one 500MB file of zeros, default limits",
			files: oneFile(bombFile{name: "bomb", size: 500 << 20}),
			want:  "workspace_limits.ratio (100:1)", maxWritten: 1<<20 + copyBuffer, maxEntries: 1,
		},
		{
			name:  "2GB of zeros in 1MB files, default limits",
			files: manyFiles(2048, func(i int) bombFile { return bombFile{name: fmt.Sprintf("f%04d", i), size: 1 << 20} }),
			want:  "workspace_limits.ratio (100:1)", maxWritten: 1<<20 + copyBuffer, maxEntries: 2,
		},
		{
			name:  "4GB of zeros in 1MB files, total 8MB",
			lim:   WorkspaceLimits{TotalSize: 8 << 20, Ratio: noRatio},
			files: manyFiles(4096, func(i int) bombFile { return bombFile{name: fmt.Sprintf("f%04d", i), size: 1 << 20} }),
			want:  "workspace_limits.total_size (8MB)", maxWritten: 8 << 20, maxEntries: 8,
		},
		{
			name: "200,000 empty files, files 1000",
			lim:  WorkspaceLimits{Files: 1000},
			files: manyFiles(200_000, func(i int) bombFile {
				return bombFile{name: fmt.Sprintf("d%03d/f%06d", i/1000, i), size: 0}
			}),
			// Directories count: 999 files and their one directory.
			want: "workspace_limits.files (1000)", maxWritten: 0, maxEntries: 1000,
		},
		{
			name:  "one file 1500 directories deep, files 1000",
			lim:   WorkspaceLimits{Files: 1000},
			files: oneFile(bombFile{name: strings.Repeat("d/", 1500) + "f", size: 0}),
			want:  "workspace_limits.files (1000)", maxWritten: 0, maxEntries: 0,
		},
		{
			name:  "a 3MB file, file_size 1MB",
			lim:   WorkspaceLimits{FileSize: 1 << 20},
			files: oneFile(bombFile{name: "big.bin", size: 3 << 20, data: noise(3 << 20)}),
			want:  "workspace_limits.file_size (1MB)", maxWritten: 0, maxEntries: 0,
		},
		{
			name:  "2.8MB of noise in 700KB files, total 2MB",
			lim:   WorkspaceLimits{TotalSize: 2 << 20},
			files: manyFiles(4, func(i int) bombFile { return bombFile{name: fmt.Sprint(i), size: 700 << 10, data: noise(700 << 10)} }),
			want:  "workspace_limits.total_size (2MB)", maxWritten: 2 << 20, maxEntries: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := t.TempDir()
			bomb := newBombStream(t, tc.files)
			began := time.Now()
			err := extractTarGz(bomb, dest, tc.lim)
			if !errors.Is(err, ErrWorkspaceLimit) || !strings.Contains(err.Error(), "workspace tarball exceeds "+tc.want) {
				t.Fatalf("extraction gave %v; want the limit %s", err, tc.want)
			}
			written, entries, _ := onDisk(t, dest)
			if written > tc.maxWritten || entries > tc.maxEntries {
				t.Fatalf("refused after writing %d bytes in %d entries; want at most %d bytes, %d entries", written, entries, tc.maxWritten, tc.maxEntries)
			}
			t.Logf("refused after %s reading %d compressed bytes; %d bytes, %d entries on disk", time.Since(began).Round(time.Millisecond), bomb.sent.Load(), written, entries)
		})
	}
}

func TestSmallArchivesPassTheRatioLimitBelowItsFloor(t *testing.T) {
	dest := t.TempDir()
	// 900KB of zeros compresses about 1000:1, but is under the 1MB floor.
	if err := extractTarGz(newBombStream(t, oneFile(bombFile{name: "zeros", size: 900 << 10})), dest, WorkspaceLimits{}); err != nil {
		t.Fatal(err)
	}
	if written, _, _ := onDisk(t, dest); written != 900<<10 {
		t.Fatalf("%d bytes extracted, want %d", written, 900<<10)
	}
}

func TestArchiveAtEveryLimitExtracts(t *testing.T) {
	dest := t.TempDir()
	lim := WorkspaceLimits{TotalSize: 4 << 20, Files: 4, FileSize: 1 << 20, Ratio: 2, RatioFloor: 64 << 10}
	err := extractTarGz(newBombStream(t, manyFiles(4, func(i int) bombFile {
		return bombFile{name: fmt.Sprint(i), size: 1 << 20, data: noise(1 << 20)}
	})), dest, lim)
	if err != nil {
		t.Fatalf("an archive exactly at its limits: %v", err)
	}
	if written, entries, biggest := onDisk(t, dest); written != 4<<20 || entries != 4 || biggest != 1<<20 {
		t.Fatalf("extracted %d bytes, %d entries, biggest %d", written, entries, biggest)
	}
}

func TestRefusedWorkspaceLeavesNothingInTheCache(t *testing.T) {
	srv := newWireServer(t, func(w http.ResponseWriter, r *request) {
		w.Header().Set("X-Revision", "rev1")
		w.Header().Set("Content-Type", "application/gzip")
		bomb := newBombStream(t, oneFile(bombFile{name: "bomb", size: 500 << 20}))
		io.Copy(w, bomb) // ends when the worker hangs up
	})
	cache := t.TempDir()
	c := NewClient(srv.URL, "t", nil, WithWorkspaceCache(cache), WithWorkspaceLimits(WorkspaceLimits{TotalSize: 4 << 20, Ratio: noRatio}))
	_, err := c.Workspace(testContext(t), "main", "rev1")
	want := `workspace "main" revision rev1: workspace tarball exceeds workspace_limits.total_size (4MB)`
	if !errors.Is(err, ErrWorkspaceLimit) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v; want %s", err, want)
	}
	// Refused from the header: lower the file limit instead to write some first.
	c = NewClient(srv.URL, "t", nil, WithWorkspaceCache(cache), WithWorkspaceLimits(WorkspaceLimits{FileSize: 1 << 30, TotalSize: 1 << 30}))
	if _, err := c.Workspace(testContext(t), "main", "rev1"); !errors.Is(err, ErrWorkspaceLimit) || !strings.Contains(err.Error(), "workspace_limits.ratio (100:1)") {
		t.Fatalf("got %v; want the ratio limit", err)
	}
	entries, err := os.ReadDir(filepath.Join(cache, "main"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("cache keeps %s after a refused download", e.Name())
	}
}
