package worker

import (
	"archive/tar"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"path/filepath"
	"strconv"

	"github.com/docker/go-units"
)

// WorkspaceLimits bound what one workspace tarball may unpack to, so a
// hostile or broken archive (a gzip bomb) is refused before it fills the
// worker's disk, not after. Each is counted as the extraction goes; the
// first one exceeded stops it, and what it wrote is removed.
type WorkspaceLimits struct {
	TotalSize int64 // bytes of all files together
	Files     int64 // entries: files, directories (listed or implied) and links
	FileSize  int64 // bytes of one file
	// Ratio bounds uncompressed bytes per compressed byte read so far, once
	// RatioFloor uncompressed bytes are out: a small archive of repetitive
	// text may compress very well, a bomb's megabytes cannot.
	Ratio      int64
	RatioFloor int64
}

// DefaultWorkspaceLimits suit workspaces of scripts, which weigh kilobytes
// to a few megabytes: 1GB and 100,000 entries leave room for a big
// repository with data files; a single file over 512MB is a data set,
// which belongs elsewhere; text compresses 3-20:1 and gzip's best is about
// 1000:1, so 100:1 past the first 1MB passes any real workspace and stops
// a bomb after it has sent about 1% of what it would unpack to.
var DefaultWorkspaceLimits = WorkspaceLimits{
	TotalSize:  1 << 30,
	Files:      100_000,
	FileSize:   512 << 20,
	Ratio:      100,
	RatioFloor: 1 << 20,
}

// orDefaults fills each unset (zero) limit from DefaultWorkspaceLimits.
func (l WorkspaceLimits) orDefaults() WorkspaceLimits {
	d := DefaultWorkspaceLimits
	for _, f := range []struct{ v, def *int64 }{
		{&l.TotalSize, &d.TotalSize}, {&l.Files, &d.Files}, {&l.FileSize, &d.FileSize},
		{&l.Ratio, &d.Ratio}, {&l.RatioFloor, &d.RatioFloor},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// ErrWorkspaceLimit is the error of an extraction stopped by a limit.
var ErrWorkspaceLimit = errors.New("workspace tarball over a limit")

// limitError names the limit tripped by its key in worker-config.yaml.
type limitError struct {
	key   string // e.g. "total_size"
	value string // the limit as configured, e.g. "1GB"
}

func (e *limitError) Error() string {
	return fmt.Sprintf("workspace tarball exceeds workspace_limits.%s (%s); nothing of it was kept "+
		"(raise workspace_limits.%s in the worker config if the workspace is meant to be this big)", e.key, e.value, e.key)
}

func (e *limitError) Unwrap() error { return ErrWorkspaceLimit }

// meter counts one extraction against its limits. Everything it counts
// sits between the network and the disk, so the disk never holds more
// than the limits allow.
type meter struct {
	lim        WorkspaceLimits
	compressed int64           // gzip bytes read
	unpacked   int64           // bytes out of gzip: tar headers, file data, padding
	written    int64           // bytes written to files
	entries    int64           // paths created, directories included
	dirs       map[uint64]bool // hashes of the directories counted
	seed       maphash.Seed
	err        error // the limit tripped, sticky
}

func (m *meter) trip(key, value string) error {
	if m.err == nil {
		m.err = &limitError{key: key, value: value}
	}
	return m.err
}

// entry counts one archive entry and the directories it brings with it
// (a/b/c/f creates up to three): each costs an inode, whether the archive
// lists it or not. size is what a regular file's header announces, refused
// up front when it cannot fit.
func (m *meter) entry(name string, typ byte, size int64) error {
	if m.dirs == nil {
		m.dirs = map[uint64]bool{}
		m.seed = maphash.MakeSeed()
	}
	n := int64(1)
	if typ == tar.TypeDir {
		if h := maphash.String(m.seed, name); m.dirs[h] {
			n = 0
		} else {
			m.dirs[h] = true
		}
	}
	// Hashes, not paths: the memory stays small however long the names.
	for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
		h := maphash.String(m.seed, d)
		if m.dirs[h] {
			break
		}
		m.dirs[h] = true
		if n++; m.entries+n > m.lim.Files {
			break
		}
	}
	m.entries += n
	if m.entries > m.lim.Files {
		return m.trip("files", strconv.FormatInt(m.lim.Files, 10))
	}
	if typ != tar.TypeReg {
		return nil
	}
	if size > m.lim.FileSize {
		return m.trip("file_size", limitText(m.lim.FileSize))
	}
	if size > m.lim.TotalSize-m.written {
		return m.trip("total_size", limitText(m.lim.TotalSize))
	}
	return nil
}

// compressedReader counts the gzip bytes read from the network.
type compressedReader struct {
	r io.Reader
	m *meter
}

func (c compressedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.m.compressed += int64(n)
	return n, err
}

// unpackedReader is the decompressed stream; it stops at the ratio limit.
type unpackedReader struct {
	r io.Reader
	m *meter
}

func (u unpackedReader) Read(p []byte) (int, error) {
	if u.m.err != nil {
		return 0, u.m.err
	}
	n, err := u.r.Read(p)
	m := u.m
	m.unpacked += int64(n)
	// Divided, not multiplied: no overflow whatever the configured ratio.
	if m.unpacked > m.lim.RatioFloor && m.unpacked/m.lim.Ratio > m.compressed {
		return 0, m.trip("ratio", strconv.FormatInt(m.lim.Ratio, 10)+":1")
	}
	return n, err
}

// fileWriter writes one extracted file, refusing any byte past the file or
// total size limit, whatever the header said.
type fileWriter struct {
	w    io.Writer
	m    *meter
	size int64 // written to this file
}

func (f *fileWriter) Write(p []byte) (int, error) {
	m, n := f.m, int64(len(p))
	if f.size+n > m.lim.FileSize {
		return 0, m.trip("file_size", limitText(m.lim.FileSize))
	}
	if m.written+n > m.lim.TotalSize {
		return 0, m.trip("total_size", limitText(m.lim.TotalSize))
	}
	w, err := f.w.Write(p)
	f.size += int64(w)
	m.written += int64(w)
	return w, err
}

// limitText writes a byte limit the way the config reads it (1MB, 64KB), or
// as "100 bytes" when it is no whole unit.
func limitText(n int64) string {
	for i, u := range []int64{units.GiB, units.MiB, units.KiB} {
		if n >= u && n%u == 0 {
			return fmt.Sprintf("%d%s", n/u, []string{"GB", "MB", "KB"}[i])
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
